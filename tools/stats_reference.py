#!/usr/bin/env python3
"""Golden values for tests/test_stats.c, computed once with scipy/numpy.

    pip install scipy numpy mpmath
    python3 tools/stats_reference.py        # prints the C initialisers

Not run by CI: the numbers it prints are committed in the test, which then
holds core/util/stats.c to scipy's and numpy's results without needing Python.
Calls used (scipy 1.17.1, numpy 2.4.6, mpmath 1.3.0 when generated):
  scipy.stats.mannwhitneyu(x, y, use_continuity=True, alternative="two-sided",
                           method="auto")
  t quantiles: mpmath.findroot on the CDF from mpmath.betainc (40 digits),
    checked against scipy.stats.t.ppf(p, df) to 1e-9 away from p = 0.5
  scipy.stats.norm.ppf(p)
  scipy.stats.t.interval(level, n - 1, loc=mean, scale=scipy.stats.sem(x))
  numpy.percentile(x, q) (method="linear"), numpy.median, numpy.std(x, ddof)
  scipy.stats.bootstrap((new, base), ratio_of_medians, method="percentile",
                        n_resamples=20000, vectorized=False, paired=False)
  and a direct re-implementation of stats.c's seeded splitmix64 bootstrap,
  which must agree with C to the last bits (the same draws, the same order).
"""
import mpmath
import numpy as np
import scipy
import scipy.stats as st

M64 = (1 << 64) - 1


def c(v):
    return repr(float(v))


def arr(name, xs):
    return "static const double %s[] = {%s};" % (name, ", ".join(c(v) for v in xs))


# ---- Mann-Whitney U ----
MWU_CASES = [
    # (x, y): untied small samples -> exact; tied or both > 8 -> asymptotic
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]),
    ([1.1, 3.2, 5.5, 2.0], [4.1, 6.3, 0.5, 7.7, 8.8, 9.9]),
    ([10.5, 11.2, 9.8], [9.1, 8.7, 10.1, 9.5, 8.2, 10.9, 9.9, 8.8]),
    ([3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0], [2.5, 3.5, 8.0, 9.7, 9.3, 2.3, 8.4, 6.2]),
    ([1.0], [2.0]),
    ([5.0, 6.0, 7.0, 8.0, 9.0], [float(v) + 0.5 for v in range(20)]),  # one side <= 8: exact
    ([1, 2, 2, 3, 3, 3, 4, 5, 9, 10], [2, 3, 4, 4, 5, 6, 6, 7, 8, 11]),  # ties: asymptotic
    ([1, 2, 2, 3], [2, 3, 4, 5, 5]),                                    # small with ties
    ([float(v) * 1.37 % 17 for v in range(12)], [float(v) * 2.11 % 19 + 0.05 for v in range(15)]),
    ([4.0] * 6, [4.0] * 6),                                             # all equal: p = 1
]


def mwu():
    out = []
    for i, (x, y) in enumerate(MWU_CASES):
        out.append(arr("mwu_x%d" % i, x))
        out.append(arr("mwu_y%d" % i, y))
    rows = []
    for i, (x, y) in enumerate(MWU_CASES):
        r = st.mannwhitneyu(x, y, use_continuity=True, alternative="two-sided", method="auto")
        ties = len(set(x + y)) < len(x) + len(y)
        exact = not ties and (len(x) <= 8 or len(y) <= 8)
        rows.append("    {mwu_x%d, %d, mwu_y%d, %d, %s, %s, %s}," % (i, len(x), i, len(y), c(r.statistic),
                                                                  c(r.pvalue), "true" if exact else "false"))
    out.append("/* {x, nx, y, ny, U1, p, exact} */")
    out.append("static const mwu_case mwu_cases[] = {\n" + "\n".join(rows) + "\n};")
    return out


# ---- quantiles ----
T_P = [0.975, 0.995, 0.9, 0.6, 0.025, 0.999999, 0.5000001, 1e-100]
T_DF = [1, 2, 3, 4, 5, 7, 10, 19, 30, 100, 999, 1000]
N_P = [1e-10, 0.001, 0.025, 0.3, 0.5, 0.7, 0.975, 0.999, 1 - 1e-10]


def t_ppf_mp(p, df):
    """t quantile to 40 digits with mpmath: the root, in u = log|t|, of
    log tail(e^u) = log q (q = min(p, 1 - p), tail from the regularized
    incomplete beta), which stays well scaled from q = 1e-100 to q = 0.4999999.
    scipy.stats.t.ppf loses digits next to p = 0.5 (for df 4 at p = 0.5000001
    it is off by 4e-4 relative, while its own t.sf confirms this root), so the
    table is mpmath's and scipy checks the rest."""
    mpmath.mp.dps = 40
    pm, v = mpmath.mpf(p), mpmath.mpf(df)
    q = pm if pm < 0.5 else 1 - pm

    def log_tail(u):
        t = mpmath.exp(u)
        x = v / (v + t * t)
        return mpmath.log(mpmath.betainc(v / 2, mpmath.mpf(1) / 2, 0, x, regularized=True) / 2)

    guess = abs(st.t.ppf(float(q), df))
    if not (0 < guess < float("inf")) or q < 1e-20:
        guess = float((q * v) ** (-1 / v))  # the far tail's power law, tail ~ t^-df
    u = mpmath.findroot(lambda u: log_tail(u) - mpmath.log(q), mpmath.log(guess), tol=mpmath.mpf(10) ** -30)
    t = float(mpmath.exp(u))
    return t if pm > 0.5 else -t


def quantiles():
    rows = []
    for df in T_DF:
        for p in T_P:
            q = t_ppf_mp(p, df)
            if abs(p - 0.5) > 1e-3 and p > 1e-20:  # scipy is checked where it is reliable
                assert abs(q - st.t.ppf(p, df)) <= 1e-9 * abs(q), (p, df)
            rows.append("    {%s, %d, %s}," % (c(p), df, c(q)))
    out = ["static const quantile_case t_cases[] = {\n" + "\n".join(rows) + "\n};"]
    rows = ["    {%s, 0, %s}," % (c(p), c(st.norm.ppf(p))) for p in N_P]
    out.append("static const quantile_case norm_cases[] = {\n" + "\n".join(rows) + "\n};")
    return out


# ---- descriptive ----
DESC = [523.1, 498.7, 530.2, 512.9, 505.5, 499.0, 541.3, 517.8, 509.6, 522.4, 515.0]
PCT_Q = [0, 10, 25, 33.3, 50, 90, 99, 100]


def descriptive():
    x = np.array(DESC)
    out = [arr("desc_x", DESC), arr("desc_q", PCT_Q), arr("desc_pct", [np.percentile(x, q) for q in PCT_Q])]
    out.append("/* mean, median, std ddof 0, std ddof 1 (numpy) */")
    out.append(arr("desc_ref", [x.mean(), np.median(x), x.std(ddof=0), x.std(ddof=1)]))
    out.append("/* median of the first 10 values (an even count) */")
    out.append(arr("desc_median_even", [np.median(DESC[:10])]))
    lo, hi = st.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=st.sem(x))
    out.append("/* 95% t interval of the mean */")
    out.append(arr("desc_ci95", [lo, hi]))
    return out


# ---- bootstrap ----
class SplitMix64:
    """core/util/common.c's vb_rng: seed, u64 and uniform, bit for bit."""

    def __init__(self, seed):
        self.s = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & M64

    def u64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def uniform(self):
        return (self.u64() >> 11) * (1.0 / 9007199254740992.0)


def seeded_bootstrap(base, new, iters, seed, level):
    rng = SplitMix64(seed)
    ratios = []
    for _ in range(iters):
        b = [base[int(rng.uniform() * len(base))] for _ in base]
        n = [new[int(rng.uniform() * len(new))] for _ in new]
        ratios.append(np.median(n) / np.median(b))
    return np.percentile(ratios, (1 - level) / 2 * 100), np.percentile(ratios, (1 + level) / 2 * 100)


BOOT_BASE = [100.0 + 3.0 * np.sin(1.7 * i) + 0.5 * i % 2 for i in range(12)]
BOOT_NEW = [80.0 + 2.5 * np.cos(1.3 * i) + 0.25 * (i % 3) for i in range(10)]


def bootstrap():
    lo, hi = seeded_bootstrap(BOOT_BASE, BOOT_NEW, 2000, 42, 0.95)
    res = st.bootstrap((np.array(BOOT_NEW), np.array(BOOT_BASE)), lambda n, b: np.median(n) / np.median(b),
                       method="percentile", n_resamples=20000, vectorized=False, paired=False,
                       confidence_level=0.95, rng=np.random.default_rng(0))
    return [arr("boot_base", BOOT_BASE), arr("boot_new", BOOT_NEW),
            "/* stats.c's algorithm re-implemented in Python: 2000 iters, seed 42, level 0.95 */",
            arr("boot_same_algo", [lo, hi]),
            "/* scipy.stats.bootstrap percentile, 20000 resamples, numpy rng 0 */",
            arr("boot_scipy", [res.confidence_interval.low, res.confidence_interval.high])]


def main():
    print("/* generated by tools/stats_reference.py (scipy %s, numpy %s, mpmath %s) */"
          % (scipy.__version__, np.__version__, mpmath.__version__))
    for part in (mwu(), quantiles(), descriptive(), bootstrap()):
        for line in part:
            print(line)


if __name__ == "__main__":
    main()
