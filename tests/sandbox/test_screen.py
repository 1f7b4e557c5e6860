"""The static pre-check: refuses clearly unsafe calls with a message, lets ordinary analysis through."""

from __future__ import annotations

import ast

import pytest

from datalyst.sandbox import screen

DATA = ["/work/sales.csv", "/work/shop.sqlite"]


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("import subprocess", "import of subprocess: starting processes"),
        ("from subprocess import run", "import of subprocess"),
        ("import multiprocessing.pool", "import of multiprocessing.pool"),
        ("import os\nos.system('ls')", "(line 2): os.system()"),
        ("from os import fork", "os.fork"),
        ("import os\nos.kill(1, 9)", "os.kill()"),
        ("import socket", "there is no network"),
        ("import urllib.request", "there is no network"),
        ("from urllib import request", "there is no network"),
        ("import requests", "there is no network"),
        ("import ctypes", "ctypes can corrupt"),
        ("__import__('ctypes')", "ctypes"),
        ("name = input('value? ')", "input() would wait forever"),
    ],
)
def test_unsafe_code_is_refused(code, fragment):
    problem = screen(code, DATA)
    assert problem is not None and problem.startswith("Refused before running")
    assert fragment in problem


@pytest.mark.parametrize(
    "code",
    [
        "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.describe()",
        "open('sales.csv').read()",
        "open('sales.csv', 'r', encoding='utf-8').read()",
        "df.to_csv('summary.csv', index=False)",
        "import os\nprint(os.listdir('.'))\nos.path.exists('sales.csv')",
        "import sqlite3\nsqlite3.connect('shop.sqlite').execute('select 1')",
        "import matplotlib.pyplot as plt\nplt.savefig('chart.png')",
        "name = 'sales.csv'.replace('.csv', '')",
        "def f(:",  # syntax errors are the interpreter's to report
    ],
)
def test_ordinary_analysis_passes(code):
    assert screen(code, DATA) is None


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("open('sales.csv', 'w').write('')", "open() on the data file sales.csv"),
        ("open('./sales.csv', mode='a')", "open() on the data file sales.csv"),
        ("open(file='sales.csv', mode='r+')", "open() on the data file sales.csv"),
        ("import os\nwith open(os.path.join('.', 'sales.csv'), 'a') as f:\n    pass", "open() on the data file"),
        ("import os\nos.open('sales.csv', os.O_WRONLY | os.O_TRUNC)", "open() on the data file sales.csv"),
        ("from pathlib import Path\nPath('sales.csv').open('w')", "open() on the data file sales.csv"),
        ("df.to_csv('sales.csv')", "to_csv() on the data file sales.csv"),
        ("df.to_csv(path_or_buf='sales.csv', index=False)", "to_csv() on the data file sales.csv"),
        ("pd.read_csv('sales.csv').to_csv('./sales.csv')", "to_csv() on the data file sales.csv"),
        ("df.to_excel(excel_writer='/work/sales.csv')", "to_excel() on the data file sales.csv"),
        ("import matplotlib.pyplot as plt\nplt.savefig('sales.csv')", "savefig() on the data file sales.csv"),
        ("fig.savefig(fname=f'{folder}/sales.csv')", "savefig() on the data file sales.csv"),
        ("import numpy as np\nnp.save('sales.csv', [1])", "save() on the data file sales.csv"),
        ("import os\nos.remove('shop.sqlite')", "remove() on the data file shop.sqlite"),
        ("import os\nos.unlink('./shop.sqlite')", "unlink() on the data file shop.sqlite"),
        ("from os import remove as rm\nrm('sales.csv')", "rm() on the data file sales.csv"),
        ("import os\nos.rename('sales.csv', 'old.csv')", "rename() on the data file sales.csv"),
        ("import os\nos.rename('new.csv', dst='sales.csv')", "rename() on the data file sales.csv"),
        ("import os\nos.replace('new.csv', 'sales.csv')", "replace() on the data file sales.csv"),
        ("import os\nos.truncate('sales.csv', 0)", "truncate() on the data file sales.csv"),
        ("import shutil\nshutil.move('sales.csv', 'x.csv')", "move() on the data file sales.csv"),
        ("import shutil\nshutil.copy('other.csv', 'sales.csv')", "copy() on the data file sales.csv"),
        ("from pathlib import Path\nPath('sales.csv').unlink()", "unlink() on the data file sales.csv"),
        ("from pathlib import Path\nPath('sales.csv').write_text('')", "write_text() on the data file sales.csv"),
        ("from pathlib import Path\n(Path('.') / 'sales.csv').unlink()", "unlink() on the data file sales.csv"),
        ("from pathlib import Path\nPath('sales.csv').rename('x.csv')", "rename() on the data file sales.csv"),
        ("from pathlib import Path\nPath('x.csv').rename('sales.csv')", "rename() on the data file sales.csv"),
    ],
)
def test_writes_to_data_files_are_refused(code, fragment):
    problem = screen(code, DATA)
    assert problem is not None and fragment in problem
    assert problem.endswith("the input data files are read-only; write results to a new file name instead.")


# Ordinary cells of the kind models write about sales.csv (pandas, numpy, matplotlib, scipy, scikit-learn,
# statsmodels, seaborn), one after another, separated by '# %%' lines: none may be refused.
ORDINARY_CELLS = r"""
import pandas as pd
df = pd.read_csv('sales.csv')
df.head()
# %%
import pandas as pd
df = pd.read_csv('sales.csv').rename(columns={'unit_price': 'price'})
df.columns
# %%
df = pd.read_csv('sales.csv').rename(columns=str.lower).rename(columns=lambda c: c.strip())
# %%
df = pd.read_csv('./sales.csv', parse_dates=['date']).rename(columns={'date': 'day'})
# %%
pd.read_csv('sales.csv').rename(index=str).to_csv('renamed.csv', index=False)
# %%
pd.read_csv('sales.csv').to_csv('copy_of_sales.csv')
# %%
df.to_csv('out.csv')
# %%
df.to_csv('out.csv', index=False)
# %%
df.to_csv(path_or_buf='summary.csv', sep=';')
# %%
df[df['region'] == 'West'].to_csv('west_sales.csv', index=False)
# %%
df.assign(source='sales.csv').to_csv('tagged.csv')
# %%
pd.read_csv('sales.csv').groupby('region')['revenue'].sum().to_csv('revenue_by_region.csv')
# %%
df.to_excel('report.xlsx', sheet_name='sales.csv')
# %%
df.to_json('sales.json', orient='records')
# %%
df.to_parquet('sales.parquet')
# %%
print(df.to_string())
# %%
print(df.head().to_markdown() if hasattr(df, 'to_markdown') else df.head())
# %%
df.groupby('region')['revenue'].sum().sort_values(ascending=False)
# %%
df.groupby(['region', 'product']).agg(units=('units', 'sum'), revenue=('revenue', 'mean')).reset_index()
# %%
pivot = df.pivot_table(index='region', columns='product', values='revenue', aggfunc='sum')
pivot.round(1)
# %%
monthly = df.set_index(pd.to_datetime(df['date'])).resample('M')['revenue'].sum()
monthly.tail()
# %%
regions = pd.DataFrame({'region': ['West', 'East'], 'manager': ['Ann', 'Bo']})
merged = df.merge(regions, on='region', how='left')
merged.head()
# %%
df2 = pd.read_csv('sales.csv')
combined = pd.concat([df, df2], ignore_index=True)
len(combined)
# %%
df['revenue_share'] = df['revenue'] / df['revenue'].sum()
df.nlargest(5, 'revenue_share')
# %%
df['region'] = df['region'].str.replace('sales.csv', '', regex=False).str.strip()
# %%
name = 'sales.csv'
stem = name.replace('.csv', '')
print(stem.upper())
# %%
files = ['sales.csv', 'notes.txt']
files.remove('sales.csv')
print(files)
# %%
import os
print(os.listdir('.'))
print(os.path.getsize('sales.csv'))
# %%
import os
print(os.path.exists('sales.csv'), os.path.splitext('sales.csv'))
# %%
from pathlib import Path
print(Path('sales.csv').read_text()[:200])
# %%
from pathlib import Path
print(Path('sales.csv').stat().st_size, Path('sales.csv').suffix)
# %%
with open('sales.csv') as f:
    header = f.readline()
print(header)
# %%
with open('sales.csv', 'r', encoding='utf-8') as f:
    n = sum(1 for _ in f)
print(n)
# %%
with open('notes.txt', 'w') as f:
    f.write('source: sales.csv\n')
# %%
with open('log.txt', 'a') as f:
    print('read sales.csv', file=f)
# %%
import shutil
shutil.copy('sales.csv', 'sales_backup.csv')
# %%
import os
os.makedirs('out', exist_ok=True)
df.to_csv(os.path.join('out', 'clean.csv'))
# %%
import os
os.rename('out.csv', 'final.csv')
# %%
import os
if os.path.exists('tmp.csv'):
    os.remove('tmp.csv')
# %%
import numpy as np
x = df['revenue'].to_numpy()
print(np.mean(x), np.std(x, ddof=1), np.percentile(x, [25, 50, 75]))
# %%
import numpy as np
np.save('revenue.npy', df['revenue'].to_numpy())
np.savetxt('units.txt', df['units'].to_numpy())
# %%
import numpy as np
q1, q3 = np.percentile(df['units'], [25, 75])
iqr = q3 - q1
outliers = df[(df['units'] < q1 - 1.5 * iqr) | (df['units'] > q3 + 1.5 * iqr)]
len(outliers)
# %%
import numpy as np
corr = np.corrcoef(df['units'], df['revenue'])[0, 1]
round(corr, 3)
# %%
import matplotlib.pyplot as plt
df.groupby('region')['revenue'].sum().plot(kind='bar')
plt.title('Revenue by region (sales.csv)')
plt.savefig('fig.png')
# %%
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(8, 4))
ax.hist(df['units'], bins=20)
fig.savefig('units_hist.png', dpi=100)
plt.close(fig)
# %%
import matplotlib.pyplot as plt
plt.scatter(df['units'], df['revenue'])
plt.xlabel('units')
plt.savefig(fname='scatter.png')
# %%
import matplotlib.pyplot as plt
ax = df.plot(x='date', y='revenue')
ax.figure.savefig('trend.png')
# %%
import matplotlib.pyplot as plt
fig = plt.figure()
plt.plot([1, 2, 3])
plt.savefig('sales.png')
# %%
from scipy import stats
stat, p = stats.shapiro(df['revenue'])
print(f'W={stat:.3f}, p={p:.4f}')
# %%
from scipy import stats
r, p = stats.pearsonr(df['units'], df['revenue'])
print(round(r, 3), round(p, 4))
# %%
from scipy.stats import ttest_ind
west = df[df.region == 'West'].revenue
east = df[df.region == 'East'].revenue
ttest_ind(west, east, equal_var=False)
# %%
from sklearn.linear_model import LinearRegression
model = LinearRegression().fit(df[['units']], df['revenue'])
print(model.coef_, model.intercept_)
# %%
from sklearn.model_selection import train_test_split
X_train, X_test, y_train, y_test = train_test_split(df[['units']], df['revenue'], test_size=0.2, random_state=0)
# %%
import statsmodels.api as sm
X = sm.add_constant(df[['units']])
print(sm.OLS(df['revenue'], X).fit().summary())
# %%
import seaborn as sns
import matplotlib.pyplot as plt
sns.boxplot(data=df, x='region', y='revenue')
plt.savefig('box.png')
# %%
summary = df.describe(include='all')
summary.to_csv('describe.csv')
summary
# %%
df = df.dropna().drop_duplicates().reset_index(drop=True)
df.rename(columns={'units': 'qty'}, inplace=True)
# %%
df['date'] = pd.to_datetime(df['date'])
df['month'] = df['date'].dt.to_period('M')
df.groupby('month')['revenue'].sum()
# %%
print(f"Rows in sales.csv: {len(df)}")
print('Columns:', ', '.join(df.columns))
# %%
df.sort_values('revenue', ascending=False).head(10)[['region', 'product', 'revenue']]
# %%
counts = df['product'].value_counts()
counts.rename('n').to_frame().to_csv('product_counts.csv')
# %%
series = df.set_index('date')['revenue'].rename('sales.csv revenue')
series.head()
# %%
df.columns = [c.replace('_', ' ').title() for c in df.columns]
df.head(3)
# %%
import json
with open('result.json', 'w') as f:
    json.dump({'file': 'sales.csv', 'rows': len(df)}, f)
# %%
result = {'file': 'sales.csv', 'answer': df['revenue'].max()}
print(result)
# %%
with pd.ExcelWriter('tables.xlsx') as writer:
    df.to_excel(writer, sheet_name='data')
""".strip().split("\n# %%\n")


def test_ordinary_cells_that_mention_data_files_are_not_refused():
    assert len(ORDINARY_CELLS) >= 50
    for code in ORDINARY_CELLS:
        ast.parse(code)  # a cell with a syntax error would pass the check without being checked
    refused = {code: problem for code in ORDINARY_CELLS if (problem := screen(code, DATA))}
    assert refused == {}
