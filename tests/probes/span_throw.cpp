// SPDX-License-Identifier: MIT
/*
 * Ground truth for spans through C++ exceptions (tests/probes/test_spans.py).
 *   span_throw N   calls tt_throw_work(i) N times from main's try block: every
 *                  10th call throws std::runtime_error out of it (caught in
 *                  main); and tt_catch_inside(i) N times: every 10th call
 *                  throws and catches inside itself, then returns normally.
 *                  Prints calls, thrown and caught_inside counts.
 */
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

extern "C" __attribute__((noinline, used)) long tt_throw_deeper(long i)
{
	if (i % 10 == 9)
		throw std::runtime_error("every tenth call fails");
	return 2 * i + 1;
}

/* The spanned function: the exception leaves it from a callee. */
extern "C" __attribute__((noinline, used)) long tt_throw_work(long i)
{
	long (*volatile deeper)(long) = tt_throw_deeper;

	return deeper(i) + 1;
}

extern "C" __attribute__((noinline, used)) long tt_catch_inside(long i)
{
	long (*volatile deeper)(long) = tt_throw_deeper;

	try {
		return deeper(i);
	} catch (const std::runtime_error &) {
		return -1;
	}
}

int main(int argc, char **argv)
{
	long n = argc == 2 ? std::atol(argv[1]) : 0, thrown = 0, inside = 0, check = 0;

	if (n <= 0) {
		std::fprintf(stderr, "usage: span_throw N\n");
		return 2;
	}
	for (long i = 0; i < n; i++) {
		try {
			check += tt_throw_work(i);
		} catch (const std::runtime_error &) {
			thrown++;
		}
		inside += tt_catch_inside(i) < 0;
	}
	std::printf("calls=%ld thrown=%ld caught_inside=%ld check=%ld\n", n, thrown, inside, check);
	return 0;
}
