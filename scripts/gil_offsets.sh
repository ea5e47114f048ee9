#!/usr/bin/env bash
# Where CPython's GIL sits in _PyRuntime, for analyze/explain/known_locks.py (GIL_OFFSET): for
# each Python 3.8+ whose headers are installed (give their include/pythonX.Y directories, e.g.
# ~/.pyenv/versions/*/include/python3.*, /usr/include/python3.11), compiles
# offsetof(_PyRuntimeState, <the main interpreter's GIL>) against that version's internal
# headers and prints "X.Y OFFSET SIZE": ceval.gil in 3.8-3.11, _main_interpreter._gil in 3.12+.
#
#   scripts/gil_offsets.sh INCLUDE_DIR...
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: scripts/gil_offsets.sh INCLUDE_DIR... (pythonX.Y header directories)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for inc in "$@"; do
	v=$(basename "$inc")
	v=${v#python}
	case $v in
	3.8) headers='#include "internal/pycore_pystate.h"'; field=ceval.gil ;;
	3.9 | 3.10 | 3.11) headers='#include "internal/pycore_runtime.h"'; field=ceval.gil ;;
	3.*) headers='#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"'; field=_main_interpreter._gil ;;
	*) echo "gil_offsets.sh: $inc: not a pythonX.Y include directory" >&2; exit 2 ;;
	esac
	cat >"$tmp/g.c" <<C
#define Py_BUILD_CORE 1
#include "Python.h"
$headers
#include <stddef.h>
#include <stdio.h>
int main(void)
{
	printf("$v %zu %zu\n", offsetof(_PyRuntimeState, $field), sizeof(struct _gil_runtime_state));
	return 0;
}
C
	cc -I"$inc" -I"$inc/internal" "$tmp/g.c" -o "$tmp/g" && "$tmp/g"
done
