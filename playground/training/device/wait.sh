#!/bin/bash
# Wait up to $1 seconds (default 540) for the detached recipe that start.sh began; print its
# progress; copy its exports, its log and (once done) the generated text, xz-compressed in
# 15 MiB parts, to $OUT.  Call again (a new device call) while the recipe still runs.
limit=${1:-540}
t0=$SECONDS
while [ ! -f /tmp/done ] && [ $((SECONDS - t0)) -lt "$limit" ]; do
  sleep 10
  echo "[$((SECONDS - t0)) s] $(tail -c 300 /tmp/log.txt | tr '\r' '\n' | tail -1)"
done
echo "done: $(cat /tmp/done 2>/dev/null || echo 'still running')"
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
free -g | head -2; df -h /tmp | tail -1; du -sh /tmp/mtp_work/* 2>/dev/null
tr '\r' '\n' < /tmp/log.txt | grep -v 'it/s\]$\|s/it\]$\|step/s\|seq/s\]\|batch/s\]\|s/batch\]' | tail -40
cp /tmp/export/* "$OUT"/ 2>/dev/null
tr '\r' '\n' < /tmp/log.txt | grep -v 'step/s,' | tail -c 2000000 > "$OUT/log.txt"
if [ -f /tmp/done ] && [ -d /tmp/mtp_work/gen ]; then
  XZ_OPT=-T0 tar -C /tmp/mtp_work -cJf /tmp/gen.tar.xz gen
  split -b 15M -d /tmp/gen.tar.xz "$OUT/gen.tar.xz.part" && ls -la "$OUT"
fi
