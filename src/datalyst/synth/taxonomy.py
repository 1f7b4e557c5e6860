"""The 18 categories of data-analysis questions that synthesis covers (DataMind's taxonomy), as data.

Each category has a description, exemplar questions (shown to a model that writes new questions of the
category) and a workflow: step-by-step procedural knowledge that trajectory sampling puts into the
prompt. All texts are this project's own; the exemplars are about made-up tables, not any benchmark's.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from datalyst.errors import ConfigError


class Category(BaseModel):
    """One kind of question: what it asks, examples of it, and how to answer it."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    exemplars: tuple[str, ...]
    workflow: str


CATEGORIES: tuple[Category, ...] = (
    Category(
        name="Aggregation",
        description="Collapse many rows into one figure or one figure per group: a sum, mean, median, "
        "maximum or count that summarises how a column behaves overall or within each group.",
        exemplars=(
            "What is the average delivery time, in days, over all orders shipped by air?",
            "Which warehouse holds the largest total stock value once quantity is multiplied by unit cost?",
            "What is the median monthly rent of listings in each borough, and which borough has the highest?",
            "How many kilowatt-hours did the three largest plants generate together in 2019?",
            "What share of all donations, in percent, came from donors who gave more than once?",
        ),
        workflow="1. Load the file and check the columns the question names, their types and missing values.\n"
        "2. Apply any filter the question states before aggregating.\n"
        "3. Group by the stated key, if any, and compute the aggregate on the stated column.\n"
        "4. Check the group sizes and that missing values were handled as asked.\n"
        "5. Round as the format asks and report the value (and group) in the required form.",
    ),
    Category(
        name="Ranking",
        description="Order items by a measure and report positions: the top or bottom items, the rank of a "
        "given item, or the item at a given place in the order.",
        exemplars=(
            "Which three products had the highest return rate last quarter?",
            "Where does the city of Leeds rank by population growth among the cities in the table?",
            "Which employee comes second when staff are ordered by number of closed tickets?",
            "Name the five counties with the lowest median household income.",
        ),
        workflow="1. Load the file and find the item column and the measure to rank by.\n"
        "2. Aggregate first if an item appears on several rows.\n"
        "3. Sort by the measure in the stated direction and decide how ties are broken.\n"
        "4. Read off the requested positions or the position of the named item.\n"
        "5. Report the items or ranks in the order and form the format asks.",
    ),
    Category(
        name="Counting",
        description="Count the rows or distinct values that satisfy one or more conditions.",
        exemplars=(
            "How many flights left more than 30 minutes late on weekends?",
            "How many distinct suppliers delivered to more than two regions?",
            "How many survey answers leave the income question blank?",
            "How many patients older than 65 were readmitted within 30 days?",
        ),
        workflow="1. Load the file and identify the columns each condition refers to.\n"
        "2. Check how values are written (case, spaces, codes for missing) before filtering.\n"
        "3. Apply every condition and count rows, or distinct values when the question says distinct.\n"
        "4. Sanity-check the count against the number of rows.\n"
        "5. Report the integer in the required form.",
    ),
    Category(
        name="Comparison",
        description="Set two or more items, groups or periods side by side on a measure and say which is "
        "higher or lower, by how much, or whether they differ at all.",
        exemplars=(
            "Did stores in the north or in the south sell more units per employee, and by how many?",
            "Is the average score of the morning class higher than that of the evening class?",
            "By what percentage does the cheapest plan's price differ from the most expensive plan's?",
            "Which of the two vaccines had the lower rate of reported side effects?",
        ),
        workflow="1. Load the file and find the groups or items to compare and the measure.\n"
        "2. Compute the measure for each side in the same way (same filters, same units).\n"
        "3. Compute the difference or ratio the question asks for.\n"
        "4. State which side is larger and by how much, rounding as required.",
    ),
    Category(
        name="Domain Specific",
        description="Questions that need a field's own definitions or formulas (a financial ratio, a sports "
        "statistic, an epidemiological rate) applied to the data.",
        exemplars=(
            "What is the batting average of each player with at least 100 at-bats, and who leads?",
            "What was the company's gross margin, in percent, in its best year?",
            "What is the body-mass index of each participant, and how many count as overweight?",
            "What is the case fatality rate per country, and which country has the highest?",
        ),
        workflow="1. Load the file and map the columns to the quantities the field's formula needs.\n"
        "2. Write down the formula and the convention it follows (units, thresholds).\n"
        "3. Compute it for the rows or groups asked about.\n"
        "4. Check the result is in a plausible range for the field.\n"
        "5. Report it rounded as required.",
    ),
    Category(
        name="Causal Analysis",
        description="Ask whether one variable affects another beyond mere association, with methods that "
        "try to separate effect from confounding (stratification, regression with controls, comparing "
        "treated and untreated groups).",
        exemplars=(
            "Does offering free shipping raise the order value once the customer's region is accounted for?",
            "After controlling for age, is smoking still associated with a higher hospital stay?",
            "Do schools that adopted the new curriculum score higher than similar schools that did not?",
            "Is the link between ice-cream sales and drownings still present within each month?",
        ),
        workflow="1. Load the file and name the cause, the outcome and plausible confounders among the columns.\n"
        "2. Look at the raw association first.\n"
        "3. Adjust for the confounders: compare within strata or fit a regression that includes them.\n"
        "4. Compare the adjusted effect with the raw one and check its significance.\n"
        "5. Report the adjusted estimate and the conclusion in the required form.",
    ),
    Category(
        name="Statistical Analysis",
        description="Summarise or test data with statistical measures: spread, growth rates, confidence "
        "intervals, hypothesis tests such as t-tests or chi-square tests.",
        exemplars=(
            "What are the standard deviation and coefficient of variation of daily sales?",
            "Is the mean weight of the two production lines different at the 5% level (two-sample t-test)?",
            "What is the 95% confidence interval of the average session length?",
            "Are gender and product preference independent according to a chi-square test?",
        ),
        workflow="1. Load the file and select the variables the test or measure needs.\n"
        "2. Clean them: drop or handle missing values as stated, check types.\n"
        "3. Choose the statistic or test named in the question (or the standard one) and compute it with "
        "scipy or pandas.\n"
        "4. Read the statistic and p-value against the stated significance level.\n"
        "5. Report the values and the decision, rounded as required.",
    ),
    Category(
        name="Correlation Analysis",
        description="Measure how strongly and in which direction two quantitative variables move together, "
        "usually with Pearson's or Spearman's coefficient, and judge the relationship.",
        exemplars=(
            "What is the Pearson correlation between advertising spend and weekly revenue?",
            "Is there a significant correlation between hours slept and reaction time (p < 0.05)?",
            "Which numeric column is most strongly correlated with house price?",
            "What is the Spearman rank correlation between a team's payroll and its wins?",
        ),
        workflow="1. Load the file and pick the two columns; make sure both are numeric.\n"
        "2. Drop rows where either value is missing (unless the question says otherwise).\n"
        "3. Compute the stated coefficient and, if asked, its p-value.\n"
        "4. Classify the relationship (direction, strength) by the thresholds the question gives.\n"
        "5. Report coefficient and verdict rounded as required.",
    ),
    Category(
        name="Arithmetic Calculation",
        description="Plain arithmetic on values read from the table: totals, differences, ratios, "
        "percentages or simple projections.",
        exemplars=(
            "How much more did the museum earn from tickets in 2021 than in 2020?",
            "If each unit costs $4.50, what is the total cost of the items in stock?",
            "What percentage of the budget did the marketing department spend?",
            "At the current monthly growth, how many subscribers will there be in three months?",
        ),
        workflow="1. Load the file and locate the exact cells or columns involved.\n"
        "2. Write the calculation out step by step.\n"
        "3. Compute it in code, keeping full precision until the end.\n"
        "4. Round once, as the format asks, and report.",
    ),
    Category(
        name="Descriptive Analysis",
        description="Describe what a dataset holds: its size, columns, types, ranges, typical values and "
        "obvious patterns, without claiming causes.",
        exemplars=(
            "How many rows and columns does the file have, and how many columns are numeric?",
            "What are the minimum, maximum and mean of every numeric column?",
            "Which column has the largest number of blank entries, and how many are there?",
            "What are the most frequent values of the category column and how often does each occur?",
        ),
        workflow="1. Load the file and print its shape, dtypes and the first rows.\n"
        "2. Compute summary statistics for numeric columns and value counts for categorical ones.\n"
        "3. Count missing values per column.\n"
        "4. Answer exactly the facts the question asks for, in the required form.",
    ),
    Category(
        name="Impact Analysis",
        description="Estimate how much a change in one factor moves an outcome, over time or across "
        "groups: the size of an effect, not only its existence.",
        exemplars=(
            "By how much does the average rating change for each extra dollar of price?",
            "How did the opening of the new line change average daily ridership at nearby stations?",
            "Which factor, rainfall or temperature, explains more of the variation in crop yield?",
            "How much does an additional year of experience add to salary on average?",
        ),
        workflow="1. Load the file and identify the factor, the outcome and the unit of comparison.\n"
        "2. Compare the outcome before and after, or across levels of the factor.\n"
        "3. Quantify the effect: a difference of means, a slope from a regression, or an explained share "
        "of variance.\n"
        "4. Check the effect's direction and size make sense.\n"
        "5. Report the effect size rounded as required.",
    ),
    Category(
        name="Fact Checking",
        description="Look up several related facts in the data and decide whether a statement about them "
        "holds, cross-referencing rows or columns.",
        exemplars=(
            "Is it true that every route with more than 10,000 passengers also had a load factor above 80%?",
            "The report says sales doubled between 2015 and 2020. Does the table support that?",
            "Did the same driver win both the fastest lap and the race in every round?",
            "Is the country with the largest area also the one with the largest population?",
        ),
        workflow="1. Load the file and split the statement into the facts it depends on.\n"
        "2. Retrieve each fact with its own query.\n"
        "3. Combine them and test the statement exactly as worded.\n"
        "4. Report true or false (and the supporting values if the format asks).",
    ),
    Category(
        name="Anomaly Detection",
        description="Find values or records that stand far from the rest (outliers by z-score or IQR, "
        "impossible values, sudden jumps) and count or list them.",
        exemplars=(
            "How many transactions have an amount more than three standard deviations from the mean?",
            "Using the 1.5 IQR rule, which sensors report outlying temperatures?",
            "Are there records with a negative age or a birth date in the future? How many?",
            "On which day did website traffic jump the most relative to the previous day?",
        ),
        workflow="1. Load the file and choose the column(s) to examine.\n"
        "2. Apply the rule the question states (z-score threshold, IQR fences, valid ranges).\n"
        "3. Flag the rows that break it and inspect a few to confirm.\n"
        "4. Report the count or the flagged items in the required form.",
    ),
    Category(
        name="Multi-hop Numerical Reasoning",
        description="Answer through a chain of computations where each step uses the previous result: "
        "filter, then aggregate, then compare or rank, and so on.",
        exemplars=(
            "Among the regions whose average order value exceeds the overall average, which has the most customers?",
            "What is the total revenue of the product category that had the largest year-on-year growth?",
            "For the month with the highest rainfall, what was the average temperature?",
            "Of the teams that scored above the median, what fraction also conceded below the median?",
        ),
        workflow="1. Load the file and write the chain of steps the question implies.\n"
        "2. Compute each intermediate result and print it before using it.\n"
        "3. Check every intermediate value for plausibility (counts, ranges).\n"
        "4. Finish the last step and report the final value in the required form.",
    ),
    Category(
        name="Time-based Calculation",
        description="Work with dates and times: trends over periods, growth rates, cumulative totals, "
        "durations between events, or comparisons of intervals.",
        exemplars=(
            "What was the month-on-month growth rate of active users in March 2022?",
            "Which weekday has the highest average number of orders?",
            "What is the cumulative rainfall by the end of each quarter?",
            "What is the average number of days between a ticket being opened and closed?",
        ),
        workflow="1. Load the file and parse the date or time column into datetime values.\n"
        "2. Sort by time and resample or group into the periods the question uses.\n"
        "3. Compute the change, growth rate, cumulative value or duration.\n"
        "4. Check the period boundaries and missing periods.\n"
        "5. Report the value for the requested period, rounded as required.",
    ),
    Category(
        name="Distribution Analysis",
        description="Describe the shape of a variable's distribution or compare distributions: skewness, "
        "kurtosis, normality tests, quantiles, or tests between groups such as Mann-Whitney U.",
        exemplars=(
            "Is the distribution of household income normal according to a Shapiro-Wilk test?",
            "What are the skewness and kurtosis of trip distances?",
            "Do response times of the two servers come from the same distribution (Mann-Whitney U)?",
            "What are the 10th, 50th and 90th percentiles of order size?",
        ),
        workflow="1. Load the file and select the variable (and the grouping, if any).\n"
        "2. Drop missing values and check the sample size.\n"
        "3. Compute the shape measures or run the named test with scipy.stats.\n"
        "4. Interpret the result against the threshold the question gives.\n"
        "5. Report the values and the conclusion in the required form.",
    ),
    Category(
        name="Feature Engineering",
        description="Build new variables from existing ones (ratios, sums, flags, bins, extracted date "
        "parts, encodings) and use or describe them.",
        exemplars=(
            "Create a column for price per square metre and report its mean.",
            "Bin customers into age groups of ten years; which group spends the most on average?",
            "Add a flag for orders placed on weekends; what share of revenue do they bring?",
            "Extract the year from the sign-up date; how many users joined in each year?",
        ),
        workflow="1. Load the file and look at the columns the new feature is built from.\n"
        "2. Define the feature exactly as stated (formula, bin edges, encoding).\n"
        "3. Create it, handling missing values and division by zero.\n"
        "4. Compute what the question asks with the new feature.\n"
        "5. Report the result rounded as required.",
    ),
    Category(
        name="Comprehensive Data Preprocessing",
        description="Several cleaning and preparation steps in sequence (fix types, handle missing values, "
        "remove duplicates, encode categories, scale numbers), then report on the cleaned data.",
        exemplars=(
            "Drop duplicate rows, fill missing prices with the median, and report the new mean price.",
            "Convert the revenue column from text like '$1,200' to numbers; what is the total?",
            "Standardise the numeric columns to zero mean and unit variance; what is the largest absolute "
            "value afterwards?",
            "After removing rows with any missing value and one-hot encoding the region, how many columns remain?",
        ),
        workflow="1. Load the file and inspect types, missing values and duplicates.\n"
        "2. Apply the cleaning steps in the order the question lists them.\n"
        "3. After each step, print the shape and a quick check that it did what was intended.\n"
        "4. Compute the requested figure on the cleaned data.\n"
        "5. Report it in the required form.",
    ),
)
"""The categories in DataMind's order."""


def category(name: str) -> Category:
    """The category called ``name`` (case and surrounding spaces do not matter)."""
    wanted = name.strip().casefold()
    for item in CATEGORIES:
        if item.name.casefold() == wanted:
            return item
    raise ConfigError(f"no category {name!r}; the categories are: {', '.join(c.name for c in CATEGORIES)}")
