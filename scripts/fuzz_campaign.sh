#!/usr/bin/env bash
# A long libFuzzer campaign over every target (fuzz/<name>_fuzz.cpp), built as scripts/fuzz_smoke.sh
# builds them (scripts/fuzz_common.sh).
#
#   scripts/fuzz_campaign.sh HOURS     # HOURS CPU-hours per target (fractions allowed: 0.01)
#
# CPU-hours: each target runs in libFuzzer's fork mode with FUZZ_JOBS worker processes (default
# nproc) for a wall-clock -max_total_time of HOURS * 3600 / FUZZ_JOBS seconds: FUZZ_JOBS x wall
# time = HOURS CPU-hours on an otherwise idle machine. What it really got is measured: user +
# system time of the fuzzer and all its workers (bash's `time`); when that is short of the budget
# (a machine shared with other work), further fork-mode rounds run for the rest (until all of it,
# 10 rounds at most). The table's CPU-hours column is the measured total. Targets run one after
# another, each with all the workers.
#
# Per target, under FUZZ_CAMPAIGN_DIR (default build-fuzz-campaign/campaign/<name>/):
#   corpus/      the inputs the workers found (seeded from the committed corpus, unpacked in seeds/)
#   artifacts/   crash-*, leak-*, timeout-*, oom-* inputs (libFuzzer's -artifact_prefix); the
#                campaign goes on after a crash (-ignore_crashes=1) and counts them
#   fuzz.log     libFuzzer's output of every round; executions are the sum of each round's last
#                stats line (#N), coverage the cov: (edges) / ft: (features) of the last stats line
# Afterwards every corpus is merged and minimised (-merge=1) with the committed one (the smallest
# set of inputs with the same coverage; committed seeds that survive keep their names) and packed
# as fuzz/corpus/<name>.tar.xz (scripts/fuzz_common.sh: committed_corpus reads a folder or a pack),
# so every CI run's short fuzz step replays what the campaign found.
# Commit fuzz/corpus/ after a campaign with 0 crashes; reproduce a crash with
#   build-fuzz-campaign/fuzz/fuzz_<name> ARTIFACT
#
# Environment: FUZZ_JOBS (workers per target), FUZZ_BUILD_DIR (default build-fuzz-campaign),
# FUZZ_TARGETS (space-separated names, e.g. "regex json_schema"; default all), FUZZ_RSS_MB
# (per-input memory limit, default 2048), FUZZ_NO_MERGE=1 (leave fuzz/corpus/ untouched),
# FUZZ_CORPUS_ROOT (the committed corpora's folder, default fuzz/corpus; a copy, to try the script),
# FUZZ_PREBUILT=1 (use the binaries in $FUZZ_BUILD_DIR/fuzz as they are: a machine without clang).
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-}
[[ "$hours" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "usage: scripts/fuzz_campaign.sh HOURS (CPU-hours per target)" >&2; exit 2; }
source scripts/fuzz_common.sh
build=${FUZZ_BUILD_DIR:-build-fuzz-campaign}
jobs=${FUZZ_JOBS:-$(nproc)}
campaign=${FUZZ_CAMPAIGN_DIR:-$build/campaign}
rss=${FUZZ_RSS_MB:-2048}
corpora=${FUZZ_CORPUS_ROOT:-fuzz/corpus}
budget=$(awk -v h="$hours" 'BEGIN { print h * 3600 }')  # CPU-seconds per target
wall=$(awk -v b="$budget" -v j="$jobs" 'BEGIN { s = int(b / j + 0.5); print (s < 1 ? 1 : s) }')
if [ "${FUZZ_PREBUILT:-0}" = 1 ]; then
  fuzz_list  # the binaries are already in $build/fuzz (scripts/fuzz_stage.sh, for another machine)
else
  fuzz_build "$build"
fi
selected=("${fuzz_targets[@]}")
if [ -n "${FUZZ_TARGETS:-}" ]; then
  selected=()
  for n in $FUZZ_TARGETS; do
    [ -f "fuzz/${n}_fuzz.cpp" ] || { echo "fuzz_campaign: no target fuzz/${n}_fuzz.cpp" >&2; exit 2; }
    selected+=("fuzz_$n")
  done
fi
for t in "${selected[@]}"; do
  [ -x "$build/fuzz/$t" ] || { echo "fuzz_campaign: no $build/fuzz/$t" >&2; exit 2; }
done
echo "campaign: ${#selected[@]} targets, ${hours} CPU-hours each = ${jobs} workers x ${wall}s (or more, if shared)"

rows=()
total_crashes=0
for t in "${selected[@]}"; do
  name=${t#fuzz_}
  dir="$campaign/$name"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  seeds=() committed=""
  if committed=$(committed_corpus "$corpora" "$name" "$dir/seeds"); then seeds+=("$committed"); fi
  # Rounds of fork mode until the target has had its CPU-hours: on a machine shared with other
  # work the workers get less CPU than their wall time, so later rounds top the budget up (to all
  # of it, 10 rounds at most). Every round resumes from the corpus of the one before.
  TIMEFORMAT='%U %S'  # bash's `time`: user and system seconds of the fuzzer and all its workers
  used=0 execs=0 counted=0 round=0 stats="" no_stats=0
  : > "$dir/fuzz.log"
  while :; do
    round=$((round + 1))
    left=$(awk -v b="$budget" -v u="$used" -v j="$jobs" 'BEGIN { s = int((b - u) / j + 0.5); print (s < 1 ? 1 : s) }')
    echo "fuzzing $t (round $round): ${jobs} workers for ${left}s"
    set +e
    { time "$build/fuzz/$t" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time="$left" -rss_limit_mb="$rss" -timeout=25 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/" "$dir/corpus" "${seeds[@]}" > "$dir/round.log" 2>&1 ; } 2> "$dir/cpu.txt"
    rc=$?
    set -e
    cat "$dir/round.log" >> "$dir/fuzz.log"
    used=$(awk -v u="$used" '{ print u + $1 + $2 }' "$dir/cpu.txt")
    # Fork mode's progress lines: "#EXECS: cov: C ft: F corp: N exec/s E oom/timeout/crash: o/t/c ...".
    last=$(grep -E '^#[0-9]+: cov: ' "$dir/round.log" | tail -1 || true)
    if [ -z "$last" ]; then
      echo "fuzz_campaign: $t printed no stats (exit $rc); see $dir/fuzz.log" >&2
      tail -20 "$dir/round.log" >&2
      no_stats=1
      break
    fi
    stats=$last
    execs=$((execs + $(sed -nE 's/^#([0-9]+):.*/\1/p' <<< "$last")))
    # The parent counts every crashing worker, even two that found the same input.
    counted=$((counted + $(sed -nE 's|.* oom/timeout/crash: [0-9]+/[0-9]+/([0-9]+).*|\1|p' <<< "$last")))
    awk -v b="$budget" -v u="$used" 'BEGIN { exit !(u >= b) }' && break
    ((round < 10)) || break
  done
  cpu_hours=$(awk -v u="$used" 'BEGIN { printf "%.3f", u / 3600 }')
  # Coverage: cov: and ft: of the last stats line from a fork job after the first (each round's
  # first line, the seed corpus's, prints its feature count under cov: too); failing that, the last.
  cov_line=$(grep -hE '^#[0-9]+: cov: .* job: ([2-9]|[1-9][0-9]+) ' "$dir/fuzz.log" | tail -1 || true)
  [ -n "$cov_line" ] || cov_line=$stats
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<< "$cov_line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<< "$cov_line")
  crashes=$(find "$dir/artifacts" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \) | wc -l)
  timeouts=$(find "$dir/artifacts" -maxdepth 1 -type f -name 'timeout-*' | wc -l)
  ooms=$(find "$dir/artifacts" -maxdepth 1 -type f -name 'oom-*' | wc -l)
  ((counted > crashes)) && crashes=$counted
  ((no_stats)) && crashes=$((crashes + 1))
  total_crashes=$((total_crashes + crashes))

  if [ "${FUZZ_NO_MERGE:-0}" != 1 ]; then
    merge_corpus "$build/fuzz/$t" "$corpora" "$name" "$dir" "$committed" "$dir/corpus" || exit 1
  fi
  note=""
  ((timeouts + ooms)) && note=" (+${timeouts} timeouts, ${ooms} ooms)"
  rows+=("| $name | $cpu_hours | ${execs:-?} | ${cov:-?} / ${ft:-?} | ${crashes}${note} |")
done

echo
echo "| target | CPU-hours | executions | coverage (cov / ft) | crashes |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "artifacts and logs: $campaign/<target>/"
[ "$total_crashes" -eq 0 ] || { echo "fuzz_campaign: $total_crashes crashes" >&2; exit 1; }
