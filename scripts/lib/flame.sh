# shellcheck shell=bash
# Flame graphs with inferno: on-CPU from perf.data, off-CPU from tailtrace's
# offcpu.folded (µs), and differential graphs between two runs.

# flame_oncpu DIR TITLE: perf.data -> oncpu.folded -> flame-oncpu.svg
flame_oncpu() {
	local dir=$1 title=$2
	[ -s "$dir/perf.data" ] || { log "no perf.data in $dir: no on-CPU flame graph"; return 0; }
	local only=()
	[ ! -s "$dir/perf.pids" ] || only=(--pid "$(cat "$dir/perf.pids")")
	perf script -i "$dir/perf.data" "${only[@]}" 2>/dev/null | inferno-collapse-perf >"$dir/oncpu.folded" 2>/dev/null ||
		{ log "perf script | inferno-collapse-perf failed: no on-CPU flame graph"; return 0; }
	if [ ! -s "$dir/oncpu.folded" ]; then
		log "perf recorded no samples: no on-CPU flame graph"
		return 0
	fi
	inferno-flamegraph --title "on-CPU: $title" --countname samples \
		<"$dir/oncpu.folded" >"$dir/flame-oncpu.svg" 2>/dev/null ||
		{ rm -f "$dir/flame-oncpu.svg"; log "inferno-flamegraph failed on oncpu.folded"; }
}

# flame_offcpu DIR TITLE: offcpu.folded (weights in µs) -> flame-offcpu.svg
flame_offcpu() {
	local dir=$1 title=$2
	if [ ! -s "$dir/offcpu.folded" ]; then
		log "no off-CPU stacks in $dir (offcpu.folded empty or absent): no off-CPU flame graph"
		return 0
	fi
	inferno-flamegraph --title "off-CPU: $title" --countname us --colors io \
		<"$dir/offcpu.folded" >"$dir/flame-offcpu.svg" 2>/dev/null ||
		{ rm -f "$dir/flame-offcpu.svg"; log "inferno-flamegraph failed on offcpu.folded"; }
}

# flame_all DIR TITLE: both graphs, or a one-line notice when inferno is absent.
flame_all() {
	local dir=$1 title=$2
	[ "$FLAME" = 1 ] || return 0
	if ! env_flame_tools; then
		log "inferno not found (cargo install inferno): skipping flame graphs"
		return 0
	fi
	phase "flame graphs"
	flame_oncpu "$dir" "$title"
	flame_offcpu "$dir" "$title"
}

# flame_diff A B FOLDED OUT_SVG TITLE: differential graph of B against A.
flame_diff() {
	local a=$1 b=$2 folded=$3 svg=$4 title=$5
	if [ ! -s "$a/$folded" ] || [ ! -s "$b/$folded" ]; then
		log "skipping $svg: $folded missing in $([ -s "$a/$folded" ] && echo "$b" || echo "$a")"
		return 1
	fi
	# Thread names differ between runs (naive-c7 vs pool-w3): compare code paths, not threads,
	# so the first frame (the thread name) is dropped; counts are normalized to the same total.
	local tmp rc=0
	tmp=$(mktemp -d)
	cut -d';' -f2- "$a/$folded" >"$tmp/a.folded"
	cut -d';' -f2- "$b/$folded" >"$tmp/b.folded"
	inferno-diff-folded --normalize "$tmp/a.folded" "$tmp/b.folded" 2>/dev/null |
		inferno-flamegraph --title "$title" >"$b/$svg" 2>/dev/null || rc=1
	rm -rf "$tmp"
	[ "$rc" = 0 ] || { rm -f "$b/$svg"; log "inferno failed on $folded"; return 1; }
	log "wrote $b/$svg"
}
