/* tools/common/bootstrap.c — see bootstrap.h. */
#include "tools/common/bootstrap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tools/common/measure.h"
#include "util/hash.h"

void ratio_ci(const double *num, const double *den, int k, double *ret_gm, double *ret_lo, double *ret_hi)
{
	double lr[BOOTSTRAP_MAX_PAIRS], bs[1000], sum = 0;
	uint64_t r = 0xB007ull;

	*ret_gm = *ret_lo = *ret_hi = 0;
	if (k < 1 || k > BOOTSTRAP_MAX_PAIRS)
		return;
	for (int i = 0; i < k; i++) {
		lr[i] = log(num[i] / den[i]);
		sum += lr[i];
	}
	*ret_gm = exp(sum / k);
	for (int b = 0; b < 1000; b++) {
		double s = 0;

		for (int i = 0; i < k; i++) {
			r = splitmix64(r);
			s += lr[r % (uint64_t)k];
		}
		bs[b] = exp(s / k);
	}
	qsort(bs, 1000, sizeof(double), cmp_double);
	*ret_lo = bs[24];
	*ret_hi = bs[974];
}
