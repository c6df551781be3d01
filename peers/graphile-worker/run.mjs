#!/usr/bin/env node
// Throughput benchmark for graphile-worker 0.18.0 (peer comparison).
//
// Per round:
//   1. reset: TRUNCATE the graphile_worker jobs/job-queues tables (schema is
//      installed/updated once via runMigrations());            [not timed]
//   2. enqueue N no-op jobs with ONE graphile_worker.add_jobs() call built from
//      generate_series, then ANALYZE the jobs table;           [not timed]
//   3. t0 -> run() a worker (taskList: { noop }) with the chosen preset;
//      wait until the no-op task has been called N times AND the jobs table is
//      empty (batched completions commit a little after the task returns)
//      -> t1;                                                  [TIMED]
//   4. runner.stop() (graceful; flushes pending batches), verify.
//
// Options (env or --flag=value):
//   JOBS / --jobs            jobs per round                  (default 20000)
//   ROUNDS / --rounds        rounds                          (default 3)
//   CONCURRENCY / --concurrency  concurrentJobs per process  (default 24, as perfTest)
//   POOL_SIZE / --pool-size  maxPoolSize per process         (default CONCURRENCY+1, as perfTest)
//   LOCAL_QUEUE_SIZE / --local-queue-size  (fast mode only)  (default 500, as perfTest)
//   PROCESSES / --processes  worker processes                (default 1; perfTest uses 4)
//   MODE=plain / PLAIN=1 / --plain   batching OFF: localQueue.size=-1,
//                            completeJobBatchDelay=-1, failJobBatchDelay=-1
//                            (the library defaults; = graphile's "Without batching")
//   ANALYZE=0 / --no-analyze skip ANALYZE after enqueue
//   DATABASE_URL             default postgres://postgres@127.0.0.1:5432/peer_graphile

import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { run, runMigrations, Logger } from "graphile-worker";

const SCRIPT = fileURLToPath(import.meta.url);
const IS_CHILD = process.argv.includes("--child");

// ---------------------------------------------------------------- options
function opt(envName, flag, def) {
  const pre = `--${flag}=`;
  const a = process.argv.find((x) => x.startsWith(pre));
  if (a) return a.slice(pre.length);
  if (process.env[envName] != null && process.env[envName] !== "")
    return process.env[envName];
  return def;
}
function intOpt(envName, flag, def) {
  const v = parseInt(opt(envName, flag, String(def)), 10);
  if (!Number.isFinite(v)) throw new Error(`bad ${envName}`);
  return v;
}

function buildConfig() {
  const plain =
    process.argv.includes("--plain") ||
    /^(1|true|yes)$/i.test(process.env.PLAIN ?? "") ||
    /^plain$/i.test(process.env.MODE ?? "");
  const concurrency = intOpt("CONCURRENCY", "concurrency", 24);
  return {
    connectionString:
      process.env.DATABASE_URL ||
      "postgres://postgres@127.0.0.1:5432/peer_graphile",
    jobs: intOpt("JOBS", "jobs", 20000),
    rounds: intOpt("ROUNDS", "rounds", 3),
    concurrency,
    poolSize: intOpt("POOL_SIZE", "pool-size", concurrency + 1),
    localQueueSize: intOpt("LOCAL_QUEUE_SIZE", "local-queue-size", 500),
    processes: Math.max(1, intOpt("PROCESSES", "processes", 1)),
    analyze:
      !process.argv.includes("--no-analyze") && process.env.ANALYZE !== "0",
    mode: plain ? "plain" : "fast",
  };
}

// Preset passed to run(). "fast" = perfTest/graphile.config.js in graphile/worker
// (concurrentJobs 24, maxPoolSize 25, localQueue {size 500, refetchDelay 10ms},
// completeJobBatchDelay 0, failJobBatchDelay 0). "plain" = same concurrency and
// pool, batching disabled (-1 is the library default for all three).
function workerPreset(cfg) {
  const worker = {
    connectionString: cfg.connectionString,
    concurrentJobs: cfg.concurrency,
    maxPoolSize: cfg.poolSize,
    gracefulShutdownAbortTimeout: 2500, // as perfTest; irrelevant for no-op jobs
  };
  if (cfg.mode === "fast") {
    Object.assign(worker, {
      localQueue: { size: cfg.localQueueSize, refetchDelay: { durationMs: 10 } },
      completeJobBatchDelay: 0,
      failJobBatchDelay: 0,
    });
  } else {
    Object.assign(worker, {
      localQueue: { size: -1 },
      completeJobBatchDelay: -1,
      failJobBatchDelay: -1,
    });
  }
  return { worker };
}

// Only warnings/errors; info logging per start/stop would just be noise.
const quietLogger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") {
    console.error(`[graphile-worker ${level}] ${message}`);
  }
});

// Starts one runner in this process; calls onCount(total) as jobs complete.
async function startWorker(cfg, onCount) {
  let count = 0;
  const runner = await run({
    preset: workerPreset(cfg),
    logger: quietLogger,
    noHandleSignals: true,
    crontab: "", // no cron
    taskList: {
      noop: async () => {
        count++;
        onCount(count);
      },
    },
  });
  return { runner, getCount: () => count };
}

// ---------------------------------------------------------------- child mode
if (IS_CHILD) {
  const cfg = JSON.parse(process.env.GW_BENCH_CFG);
  let handle = null;
  let lastSent = 0;
  let timer = null;
  const flush = () => {
    timer = null;
    const n = handle?.getCount() ?? 0;
    if (n !== lastSent) {
      lastSent = n;
      process.send({ type: "count", n });
    }
  };
  process.on("message", async (msg) => {
    if (msg.type === "go") {
      handle = await startWorker(cfg, () => {
        // throttle IPC: at most one progress message per 5ms
        if (timer === null) timer = setTimeout(flush, 5);
      });
      process.send({ type: "ready" });
    } else if (msg.type === "stop") {
      await handle.runner.stop();
      if (timer) clearTimeout(timer);
      process.send({ type: "stopped", n: handle.getCount() }, () =>
        process.exit(0),
      );
    }
  });
  process.send({ type: "loaded" });
} else {
  await main();
}

// ---------------------------------------------------------------- parent
function waitFor(pred, what, timeoutMs = 600_000) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (pred()) return resolve();
      if (Date.now() - start > timeoutMs)
        return reject(new Error(`timeout waiting for ${what}`));
      setTimeout(tick, 1);
    };
    tick();
  });
}

async function resetAndEnqueue(client, cfg) {
  // Every round starts from an empty queue. TRUNCATE rather than DELETE so that
  // every round starts with the same (unbloated) heap/indexes.
  await client.query(
    `truncate graphile_worker._private_jobs, graphile_worker._private_job_queues`,
  );
  // Bulk add via the public SQL API (graphile_worker.add_jobs(job_spec[])), the
  // same construction as graphile's perfTest/init.js; one statement, one txn.
  const t = process.hrtime.bigint();
  const { rows } = await client.query(
    `select count(*)::int as n from graphile_worker.add_jobs(
       array(
         select json_populate_record(null::graphile_worker.job_spec,
                  json_build_object('identifier', 'noop',
                                    'payload', json_build_object('id', i)))
         from generate_series(1, $1::int) i
       )
     )`,
    [cfg.jobs],
  );
  if (rows[0].n !== cfg.jobs)
    throw new Error(`enqueued ${rows[0].n}, expected ${cfg.jobs}`);
  if (cfg.analyze) await client.query(`analyze graphile_worker._private_jobs`);
  return Number(process.hrtime.bigint() - t) / 1e9;
}

async function remainingJobs(client) {
  const { rows } = await client.query(
    `select count(*)::int as n from graphile_worker._private_jobs`,
  );
  return rows[0].n;
}

// Runs one timed round; returns { seconds, startupMs, executed }.
async function timedRound(client, cfg) {
  let total = 0;
  let stop;
  let startupMs;
  let t0;

  if (cfg.processes === 1) {
    t0 = process.hrtime.bigint();
    const h = await startWorker(cfg, (n) => {
      total = n;
    });
    startupMs = Number(process.hrtime.bigint() - t0) / 1e6;
    stop = async () => {
      await h.runner.stop();
      return h.getCount();
    };
  } else {
    // Fork and load children BEFORE t0 (Node boot/import is not timed).
    const kids = [];
    for (let i = 0; i < cfg.processes; i++) {
      const c = fork(SCRIPT, ["--child"], {
        env: { ...process.env, GW_BENCH_CFG: JSON.stringify(cfg) },
      });
      const k = { c, n: 0, loaded: false, ready: false, stopped: null };
      c.on("message", (m) => {
        if (m.type === "loaded") k.loaded = true;
        else if (m.type === "ready") k.ready = true;
        else if (m.type === "count") {
          k.n = m.n;
          total = kids.reduce((s, x) => s + x.n, 0);
        } else if (m.type === "stopped") k.stopped = m.n;
      });
      c.on("exit", (code) => {
        if (code !== 0 && k.stopped == null)
          console.error(`child ${i} exited with code ${code}`);
      });
      kids.push(k);
    }
    await waitFor(() => kids.every((k) => k.loaded), "children to load", 30_000);
    t0 = process.hrtime.bigint();
    for (const k of kids) k.c.send({ type: "go" });
    await waitFor(() => kids.every((k) => k.ready), "children to start", 30_000);
    startupMs = Number(process.hrtime.bigint() - t0) / 1e6;
    stop = async () => {
      for (const k of kids) k.c.send({ type: "stop" });
      await waitFor(() => kids.every((k) => k.stopped != null), "children to stop", 60_000);
      return kids.reduce((s, k) => s + k.stopped, 0);
    };
  }

  // 1) every job executed (counted by the no-op task)
  await waitFor(() => total >= cfg.jobs, "all jobs to execute");
  // 2) every completion committed (jobs table empty)
  while ((await remainingJobs(client)) > 0) {
    await new Promise((r) => setTimeout(r, 2));
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;

  const executed = await stop();
  const left = await remainingJobs(client);
  if (executed !== cfg.jobs || left !== 0) {
    throw new Error(
      `count mismatch: executed=${executed} expected=${cfg.jobs} remaining_rows=${left}`,
    );
  }
  return { seconds, startupMs, executed };
}

// Committed+rolled-back transactions in this database (pg_stat_database), for
// an approximate "transactions per job" figure. Includes this script's own few
// polling queries and the worker's startup/shutdown statements.
async function dbCommits(client) {
  await client.query(`select pg_stat_force_next_flush()`);
  await client.query(`select pg_stat_clear_snapshot()`);
  const { rows } = await client.query(
    `select (xact_commit + xact_rollback)::bigint as n from pg_stat_database where datname = current_database()`,
  );
  return Number(rows[0].n);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function main() {
  const cfg = buildConfig();
  await runMigrations({
    connectionString: cfg.connectionString,
    logger: quietLogger,
  });

  const client = new pg.Client({ connectionString: cfg.connectionString });
  await client.connect();
  const { rows: [srv] } = await client.query(
    `select current_setting('server_version') v, current_setting('synchronous_commit') sc,
            current_setting('fsync') fs, current_setting('shared_buffers') sb`,
  );
  const p = workerPreset(cfg).worker;
  console.log(
    `graphile-worker 0.18.0 | node ${process.version} | postgres ${srv.v} ` +
      `(synchronous_commit=${srv.sc}, fsync=${srv.fs}, shared_buffers=${srv.sb})`,
  );
  console.log(
    `mode=${cfg.mode} jobs=${cfg.jobs} rounds=${cfg.rounds} processes=${cfg.processes} ` +
      `concurrentJobs=${p.concurrentJobs} maxPoolSize=${p.maxPoolSize} ` +
      `localQueue=${JSON.stringify(p.localQueue)} ` +
      `completeJobBatchDelay=${p.completeJobBatchDelay} failJobBatchDelay=${p.failJobBatchDelay}`,
  );

  const rates = [];
  const secs = [];
  for (let r = 1; r <= cfg.rounds; r++) {
    const enqSec = await resetAndEnqueue(client, cfg);
    const x0 = await dbCommits(client);
    const { seconds, startupMs } = await timedRound(client, cfg);
    await new Promise((r) => setTimeout(r, 300)); // let exited backends flush stats
    const xacts = (await dbCommits(client)) - x0;
    const rate = cfg.jobs / seconds;
    rates.push(rate);
    secs.push(seconds);
    console.log(
      `round ${r}: jobs=${cfg.jobs} seconds=${seconds.toFixed(3)} jobs/s=${rate.toFixed(0)}` +
        `  (worker startup ${startupMs.toFixed(0)}ms included; enqueue ${enqSec.toFixed(2)}s not timed;` +
        ` ~${(xacts / cfg.jobs).toFixed(3)} db xacts/job)`,
    );
  }
  console.log(
    `summary: mode=${cfg.mode} jobs=${cfg.jobs} rounds=${cfg.rounds} ` +
      `jobs/s median=${median(rates).toFixed(0)} min=${Math.min(...rates).toFixed(0)} ` +
      `max=${Math.max(...rates).toFixed(0)} | seconds median=${median(secs).toFixed(3)}`,
  );
  await client.end();
}
