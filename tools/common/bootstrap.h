/*
 * tools/common/bootstrap.h — the spread of a paired A/B ratio: geometric
 * mean of the per-pair ratios and a percentile bootstrap 95% interval.
 */
#ifndef PPRPC_TOOLS_BOOTSTRAP_H
#define PPRPC_TOOLS_BOOTSTRAP_H

#define BOOTSTRAP_MAX_PAIRS 256

/* Geometric mean of num[i] / den[i] over k pairs (1..BOOTSTRAP_MAX_PAIRS)
 * and the 2.5th / 97.5th percentiles of 1000 resampled geometric means
 * (fixed seed: the same pairs give the same interval).  All 0 for k < 1. */
void ratio_ci(const double *num, const double *den, int k, double *ret_gm, double *ret_lo, double *ret_hi);

#endif
