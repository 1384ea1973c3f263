#!/usr/bin/env bash
# The device tool brings back at most 8 files from $OUT (16 MiB each): run this last in a device call
# that writes more (tools/gpu/test.sh writes a log a suite, bench_configs.sh one a configuration)
# to fold them into $OUT/logs.tar.gz, keeping the files named in KEEP beside it (default: the
# summaries: summary.txt bench_configs.md ncu_source_hot.txt gpu.txt). Files over 12 MiB (ncu
# reports) are left out of the archive and listed in $OUT/left_out.txt instead.
#
#   ONLY=... tools/gpu/test.sh; tools/gpu/bench_configs.sh ...; tools/gpu/pack_out.sh
set -uo pipefail
out=${OUT:?OUT is not set (the device tool sets it)}
keep=" ${KEEP:-summary.txt bench_configs.md ncu_source_hot.txt gpu.txt} "
cd "$out" || exit 1
files=() big=()
while IFS= read -r -d '' f; do
  f=${f#./}
  [[ $keep == *" $f "* || $f == logs.tar.gz || $f == left_out.txt ]] && continue
  if [ "$(stat -c %s "$f")" -gt $((12 * 1024 * 1024)) ]; then big+=("$f"); else files+=("$f"); fi
done < <(find . -type f -print0 | sort -z)
if [ ${#big[@]} -gt 0 ]; then
  for f in "${big[@]}"; do echo "$f $(stat -c %s "$f") bytes" >> left_out.txt; done
  rm -f "${big[@]}"
fi
[ ${#files[@]} -eq 0 ] && exit 0
tar -czf logs.tar.gz "${files[@]}" && rm -f "${files[@]}" && find . -mindepth 1 -type d -empty -delete
echo "packed ${#files[@]} files into $out/logs.tar.gz ($(du -h logs.tar.gz | cut -f1))"
