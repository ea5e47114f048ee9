// SPDX-License-Identifier: MIT
/*
 * demangle: C++ (Itanium ABI) and Rust (legacy and v0) symbol names as c++filt
 * and rustfilt print them, by GNU libiberty's demangler (the one c++filt runs;
 * libiberty-dev, linked statically, LGPL-2.1+).
 *
 * Rust first: a legacy Rust name (_ZN...17h<hash>E) is valid C++ too, and
 * rustfilt prints it without its hash, as libiberty's Rust demangler does. C++
 * with c++filt's own options (parameters, const, std:: spelled out).
 */
#include "symbols/syms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <libiberty/demangle.h>

char *syms_demangle(const char *name)
{
	char *d;

	if (name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	d = rust_demangle(name, DMGL_PARAMS | DMGL_ANSI);
	return d ? d : cplus_demangle_v3(name, DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE);
}

/* The name without its parameter list and qualifiers: "ns::C::f(int) const" ->
 * "ns::C::f". Template arguments stay ("f<int>(int)" -> "f<int>"). */
static size_t name_len_without_params(const char *d)
{
	size_t n = strlen(d);
	int depth = 0;

	/* the parameter list is the last top-level "(...)" group */
	for (size_t i = n; i-- > 0;) {
		if (d[i] == ')')
			depth++;
		else if (d[i] == '(' && --depth == 0)
			return i;
	}
	return n;
}

bool syms_demangled_matches(const char *demangled, const char *want)
{
	size_t n;

	if (!strcmp(demangled, want))
		return true;
	if (strchr(want, '('))
		return false; /* a full signature must match whole */
	n = name_len_without_params(demangled);
	return n == strlen(want) && !strncmp(demangled, want, n);
}
