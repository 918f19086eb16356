#!/usr/bin/env bash
# tests/slurm/slurm_sweep_test.sh: `kascade sweep --slurm` against a real Slurm: a one-node cluster (munged,
# slurmctld, slurmd from Debian's slurm-wlm and munge, installed if missing) started in a temporary folder.
#   1. the quick sweep as job arrays into a shared results folder: every run row equals a local sweep's;
#   2. the quick sweep with --shard-dir: the merged database equals the shared-folder one;
#   3. a second sweep with one array task cancelled: `kascade status` counts it failed, and submitting again runs
#      that job only.
# Usage: slurm_sweep_test.sh KASCADE_BIN SHARED_DIR SOURCE_DIR. Exit 77 (skipped) only when it cannot be root.
set -euo pipefail

kascade=$(realpath "$1")
shared=$(realpath "$2")
source_dir=$(realpath "$3")

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    exec sudo -n --preserve-env=PATH bash "$0" "$@"
  fi
  echo "SKIPPED: the Slurm test starts munged, slurmctld and slurmd, which needs root (or passwordless sudo)"
  exit 77
fi

for tool in slurmctld slurmd sbatch munged sqlite3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "installing slurm-wlm and munge (apt)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge sqlite3 >/dev/null
    break
  fi
done

work=$(mktemp -d /tmp/kascade-slurm-XXXXXX)
chmod 755 "$work"
cleanup() {
  for pid_file in "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munge/munged.pid"; do
    if [ -s "$pid_file" ]; then kill "$(cat "$pid_file")" 2>/dev/null || true; fi
  done
  # Bounded wait for the daemons to exit before their folder goes.
  for _ in $(seq 50); do
    alive=0
    for pid_file in "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munge/munged.pid"; do
      if [ -s "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then alive=1; fi
    done
    [ $alive -eq 0 ] && break
    sleep 0.1
  done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAILED: $*" >&2
  for log in "$work"/log/*.log; do echo "== $log" >&2; tail -n 20 "$log" >&2; done
  exit 1
}

# ---- A one-node cluster in $work ----
mkdir -p "$work/munge" "$work/state" "$work/spool" "$work/log"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 0400 "$work/munge/munge.key"
munged --force --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
       --pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed"
node=$(hostname -s)
# The sweep's array tasks take a fraction of a second, so Slurm's own pacing sets this test's length: by default it
# delays batch scheduling by 3 s (batch_sched_delay) and starts tasks once a second on an event, so 41 tasks on 2 CPUs
# took a minute per sweep. No delay, and 8 slots on the node (more than its cores: config_overrides) so that one
# scheduling pass starts most of a level at once: 67 -> 14 s for part 1 on a 2-core VM.
port=$((17000 + RANDOM % 2000))
cat > "$work/slurm.conf" <<CONF
ClusterName=kascadetest
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
SlurmdParameters=config_overrides
NodeName=$node CPUs=8 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 300); do
  [ "$(sinfo -h -o %T 2>/dev/null)" = "idle" ] && break
  sleep 0.1
done
[ "$(sinfo -h -o %T)" = "idle" ] || fail "the Slurm node did not come up"
echo "Slurm is up: $(sinfo -h -o '%P %D %T %c')"

export KASCADE_ASSETS="$shared"
quick="$source_dir/experiments/stories260k-quick.toml"

# Waits (bounded) until none of the given jobs is queued or running.
wait_for_jobs() {
  for _ in $(seq 1800); do
    [ -z "$(squeue -h -j "$1" -o %i 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  fail "jobs $1 still queued after 15 minutes"
}

# "<id> <key> <method> <ppl_dense> <ppl_sparse> <density>" of every run, by key (ids differ between folders).
run_rows() {
  sqlite3 "$1/kascade.db" "SELECT r.key, r.method, printf('%.12g', m.ppl_dense), printf('%.12g', m.ppl_sparse),
                                  printf('%.12g', m.nll_sparse), printf('%.12g', m.density)
                             FROM runs r JOIN run_metrics m ON m.run_id = r.id ORDER BY r.key"
}
everything() {
  run_rows "$1"
  sqlite3 "$1/kascade.db" "SELECT key, stage, path FROM artifacts ORDER BY key;
                           SELECT key, n_anchor_layers, n_reuse_layers FROM schedules ORDER BY key"
}
submitted_ids() { grep -oE 'job [0-9]+' "$1" | awk '{print $2}' | paste -sd, -; }

# ---- 1. The quick sweep on Slurm vs locally ----
"$kascade" sweep "$quick" --results "$work/local" --jobs 2 >/dev/null
"$kascade" sweep "$quick" --slurm --results "$work/cluster" --cpus-per-task 1 --time 00:30:00 | tee "$work/submit1.txt"
ids=$(submitted_ids "$work/submit1.txt")
[ -n "$ids" ] || fail "no job ids printed"
[ "$(grep -c '^level' "$work/submit1.txt")" -ge 3 ] || fail "expected one array per dependency level"
wait_for_jobs "$ids"
[ "$(run_rows "$work/local" | wc -l)" -eq 22 ] || fail "the local sweep has $(run_rows "$work/local" | wc -l) runs"
diff <(run_rows "$work/local") <(run_rows "$work/cluster") || fail "Slurm runs differ from the local sweep's"
[ "$(sqlite3 "$work/cluster/kascade.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check"
"$kascade" status --results "$work/cluster" | tee "$work/status1.txt" | tail -n 4
grep -qE " 41 +41 +0 +0 +0 +0 " "$work/status1.txt" || fail "status should count 41 of 41 jobs done"
echo "1. quick sweep on Slurm: 22 runs equal to the local sweep's"

# ---- 2. Shards on task-local folders, merged by a final job ----
"$kascade" sweep "$quick" --slurm --results "$work/sharded" --shard-dir "$work/shards" | tee "$work/submit2.txt"
grep -q '^merge: job' "$work/submit2.txt" || fail "no merge job submitted"
ids2=$(submitted_ids "$work/submit2.txt")
wait_for_jobs "$ids2"
diff <(everything "$work/cluster") <(everything "$work/sharded") || fail "merged shards differ from the shared folder"
[ "$(sqlite3 "$work/sharded/kascade.db" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check (sharded)"
echo "2. --shard-dir: the merged database equals the shared-folder one"

# ---- 3. One cancelled task, then a re-submission that runs only it ----
second="$work/second.toml"
sed -e 's/^tokens = 8687 .*/tokens = 1533/' -e 's/^offset = 8687 .*/offset = 1533/' -e 's/^tokens = 8192/tokens = 1022/' \
    -e 's/^topk_tiles = .*/topk_tiles = [6]/' -e 's/^threshold = .*/threshold = 0.7/' "$quick" > "$second"
victim=$("$kascade" sweep "$second" --dry-run --results "$work/cluster" | grep -E '^\[ *[0-9]+/[0-9]+\] eval +run +oracle' \
         | head -n 1 | sed -E 's/^\[ *([0-9]+)\/.*/\1/')
[ -n "$victim" ] || fail "no oracle job in the second sweep's plan"
victim=$((victim - 1))  # the listing counts from 1, job indices from 0
"$kascade" sweep "$second" --slurm --results "$work/cluster" --sbatch-arg=--hold | tee "$work/submit3.txt"
ids3=$(submitted_ids "$work/submit3.txt")
second_key=$(grep -oE '\(sweep [0-9a-f]{16}\)' "$work/submit3.txt" | grep -oE '[0-9a-f]{16}')
victim_array=$(sqlite3 "$work/cluster/kascade.db" "SELECT job_id FROM slurm_arrays WHERE sweep_key = '$second_key'
                 AND EXISTS (SELECT 1 FROM json_each(job_indices) WHERE value = $victim)")
[ -n "$victim_array" ] || fail "job $victim is in no submitted array"
scancel "${victim_array}_${victim}"
for id in ${ids3//,/ }; do scontrol release "$id"; done
wait_for_jobs "$ids3"
"$kascade" status --results "$work/cluster" > "$work/status3.txt"
line=$(grep -E "^$second_key " "$work/status3.txt") || fail "status lists no sweep $second_key"
echo "$line"
read -r _ _ n_jobs n_done _ _ _ n_failed _ <<<"$line"
[ "$n_failed" = 1 ] && [ "$n_done" = $((n_jobs - 1)) ] || fail "status after the cancel: $line"
before=$(sqlite3 "$work/cluster/kascade.db" "SELECT id, key, finished_at FROM runs ORDER BY id")
"$kascade" sweep "$second" --slurm --results "$work/cluster" | tee "$work/submit4.txt"
grep -q "1 to submit as 1 job arrays" "$work/submit4.txt" || fail "the re-submission should hold exactly the cancelled job"
ids4=$(submitted_ids "$work/submit4.txt")
wait_for_jobs "$ids4"
after=$(sqlite3 "$work/cluster/kascade.db" "SELECT id, key, finished_at FROM runs ORDER BY id")
[ "$(diff <(echo "$before") <(echo "$after") | grep -c '^>')" -eq 1 ] || fail "more than the cancelled job ran again"
[ "$(diff <(echo "$before") <(echo "$after") | grep -c '^<')" -eq 0 ] || fail "a stored run changed"
[ "$(ls "$work/cluster/slurm/$second_key/logs" | grep -c "^${ids4}_")" -eq 1 ] || fail "the re-submission ran more than one task"
line=$("$kascade" status --results "$work/cluster" | grep -E "^$second_key ")
read -r _ _ n_jobs n_done _ _ _ n_failed _ <<<"$line"
[ "$n_failed" = 0 ] && [ "$n_done" = "$n_jobs" ] || fail "status after the re-submission: $line"
echo "3. cancelled task $victim re-ran alone after re-submission"
echo "PASSED"
