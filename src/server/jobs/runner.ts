import { setMaxListeners } from 'node:events'
import { sql } from 'kysely'
import { continueTrace } from '../metrics/tracing.js'
import { type Db, isDatabaseUnavailable } from '../store/db.js'
import type { JobRow } from '../store/schema.js'
import { type Fence, FenceLost } from './fence.js'
import { type JobListener, listenForJobs } from './notify.js'
import { claimJobs, completeJobs, failJob } from './queue.js'

/** pino's call shape, so the server's logger fits as is; console-like fallbacks are easy to write. */
export interface JobLogger {
  info(object: Record<string, unknown>, message: string): void
  warn(object: Record<string, unknown>, message: string): void
  error(object: Record<string, unknown>, message: string): void
}

export interface JobRunContext {
  db: Db
  /** Aborted when the runner stops: stop waiting (receipts, RPC) and throw. Nothing is recorded then. */
  signal: AbortSignal
  log: JobLogger
  /** The runner's clock (scheduling); tests move it. */
  now: () => Date
  /**
   * This claim's fencing token (jobs/fence.ts): every write that moves money is conditional on it, so a
   * step that resumes after its claim was taken over can record (and so broadcast) nothing.
   */
  fence: Fence
  /**
   * Waits for `work` without holding a slot (a transaction's receipt, the next block): the runner starts
   * other jobs meanwhile. The claim stays this job's (its lease is renewed) and the slot is taken back
   * when `work` settles.
   */
  idle<T>(work: Promise<T>): Promise<T>
}

export interface JobHandler {
  /** Resolves with the job's result (stored); throws to run again later with backoff. */
  run(job: JobRow, ctx: JobRunContext): Promise<unknown>
  /** Claims before giving up (default 8). `RetryLater` errors never count toward giving up. */
  maxAttempts?: number
  /** Wait before the next attempt after `attempts` failed ones (default: exponential, 1 s to 60 s). */
  retryDelayMs?(attempts: number): number
  /** The last attempt failed: leave the payment in a final, explained state. */
  onGiveUp?(job: JobRow, error: unknown, ctx: JobRunContext): Promise<void>
}

/**
 * Thrown by a handler whose step is in flight on the chain (a broadcast transaction without a receipt
 * yet): try again later, and never give up, because giving up could mark failed a payment that lands.
 */
export class RetryLater extends Error {
  override name = 'RetryLater'
}

export interface JobRunnerOptions {
  db: Db
  /** By job kind; the runner claims only these kinds. */
  handlers: Readonly<Record<string, JobHandler>>
  /** Pause between polls when idle (default 500 ms). */
  intervalMs?: number
  /**
   * Lease of a claim (default 10 s), renewed every third of it while the handler runs: a runner that
   * dies (SIGKILL, lost host) leaves its jobs to another within about this long.
   */
  leaseMs?: number
  /**
   * Jobs working at once in this runner (default 64); jobs idle on the chain (`ctx.idle`) do not count.
   * A job holds a connection only for its statements, never while waiting, so this is not bounded by
   * the database pool.
   */
  concurrency?: number
  log?: JobLogger
  /**
   * The database's connection string: LISTEN for new jobs and start them as soon as they commit rather
   * than at the next poll (see notify.ts). Without it the runner only polls.
   */
  listenUrl?: string
  /** When jobs are due and retried (default the system clock); tests move it. */
  now?: () => Date
}

export interface JobRunner {
  /** Claims and starts what is due now; resolves when those jobs are done. */
  runOnce(): Promise<number>
  /** Stops polling, aborts running jobs and gives their claims back (they run again elsewhere). */
  stop(): Promise<void>
}

const silent: JobLogger = { info() {}, warn() {}, error() {} }

export const defaultLeaseMs = 10_000

/**
 * Runs due jobs: polls the jobs table every `intervalMs` and, with `listenUrl`, also as soon as a job is
 * enqueued. Claims are leases taken with FOR UPDATE SKIP LOCKED (see queue.ts), so any number of runners
 * on one database share the work and a runner that dies leaves its jobs to the lease.
 */
export function startJobRunner(options: JobRunnerOptions): JobRunner {
  const { db, handlers } = options
  const kinds = Object.keys(handlers)
  const intervalMs = options.intervalMs ?? 500
  const leaseMs = options.leaseMs ?? defaultLeaseMs
  const concurrency = options.concurrency ?? 64
  const log = options.log ?? silent
  const now = options.now ?? (() => new Date())
  const controller = new AbortController()
  // Every running job listens for the stop.
  setMaxListeners(0, controller.signal)
  const inFlight = new Set<Promise<void>>()
  let timer: NodeJS.Timeout | undefined
  let polling: Promise<unknown> = Promise.resolve()
  let listener: JobListener | undefined

  /** Claims held by running jobs, renewed together (one statement per renewal, however many jobs run). */
  const claims = new Map<string, { job: JobRow; renewedAt: number; lost(): void }>()
  const renewals = setInterval(() => void renewAll(), leaseMs / 3)
  renewals.unref()
  let working = 0

  async function renewAll(): Promise<void> {
    const held = [...claims.values()]
    if (held.length === 0) return
    const renewed = await renewLeases(
      db,
      held.map((c) => c.job),
      leaseMs,
    ).catch(() => undefined)
    const at = Date.now()
    for (const claim of held) {
      if (renewed?.has(claim.job.id)) claim.renewedAt = at
      // Claimed again by another runner, or the database unreachable for a whole lease.
      else if (renewed !== undefined || at - claim.renewedAt >= leaseMs) {
        log.warn({ jobId: claim.job.id, kind: claim.job.kind }, 'Job lease lost; stopping the step')
        claim.lost()
      }
    }
  }

  /**
   * The results of the steps that end in one turn (a block's relays, woken together) in one statement;
   * each step still waits for its own row to be written before its slot is free, and a group that failed
   * is written one by one.
   */
  let completing: { done: { job: JobRow; result: unknown }[]; written: Promise<void> } | undefined
  function complete(job: JobRow, result: unknown): Promise<void> {
    let group = completing
    if (!group) {
      const done: { job: JobRow; result: unknown }[] = []
      const written = new Promise((resolve) => setImmediate(resolve)).then(() => {
        if (completing?.done === done) completing = undefined
        return completeJobs(db, done, now())
      })
      group = completing = { done, written }
    }
    group.done.push({ job, result })
    // One row the statement refused must not fail the others': each writes its own again.
    return group.written.catch(() => completeJobs(db, [{ job, result }], now()))
  }

  async function execute(job: JobRow): Promise<void> {
    const handler = handlers[job.kind]!
    // The step stops when the runner stops or when this claim is lost: renewing failed for a whole
    // lease (the database was unreachable) or found the job claimed again by another runner.
    const claim = new AbortController()
    const stopStep = () => claim.abort()
    controller.signal.addEventListener('abort', stopStep, { once: true })
    const ctx: JobRunContext = {
      db,
      signal: claim.signal,
      log,
      now,
      fence: { jobId: job.id, generation: job.attempts },
      async idle(work) {
        working -= 1
        claimSoon()
        try {
          return await work
        } finally {
          working += 1
        }
      },
    }
    claims.set(job.id, { job, renewedAt: Date.now(), lost: stopStep })
    working += 1
    try {
      await continueTrace(job.trace_parent, `job ${job.kind}`, jobSpanAttributes(job), async () => {
        const result = await handler.run(job, ctx)
        await complete(job, result)
      })
    } catch (error) {
      if (controller.signal.aborted) {
        await releaseJob(db, job.id).catch(() => {})
        return
      }
      // Another runner has (or will have) the job: its outcome is not ours to record. A fenced write that
      // was refused says so before the renewal notices.
      if (claim.signal.aborted) return
      if (error instanceof FenceLost) {
        log.warn({ jobId: job.id, kind: job.kind, paymentId: job.payment_id }, error.message)
        return
      }
      // A database outage is nobody's verdict on the step: wait it out like a transaction in flight.
      const forever = error instanceof RetryLater || isDatabaseUnavailable(error)
      const maxAttempts = forever ? Number.POSITIVE_INFINITY : (handler.maxAttempts ?? 8)
      const message = error instanceof Error ? error.message : String(error)
      const context = { jobId: job.id, kind: job.kind, paymentId: job.payment_id, attempts: job.attempts }
      // Tries since the job was last queued for new work (rearmJob); `attempts` is its fence and never resets.
      const tries = job.attempts - job.armed_attempts
      if (tries >= maxAttempts) {
        log.error({ ...context, error: message }, 'Job failed for the last time')
        await handler
          .onGiveUp?.(job, error, ctx)
          .catch((giveUpError: unknown) =>
            log.error({ ...context, error: String(giveUpError) }, 'Job give-up handler failed'),
          )
      } else if (!forever) {
        log.warn({ ...context, error: message }, 'Job failed; retrying with backoff')
      }
      await failJob(db, job, error, {
        maxAttempts,
        now: now(),
        ...(handler.retryDelayMs ? { backoffMs: handler.retryDelayMs(tries) } : {}),
      })
    } finally {
      working -= 1
      claims.delete(job.id)
      // A slot is free: start the next due job now rather than at the next poll.
      claimSoon()
      controller.signal.removeEventListener('abort', stopStep)
    }
  }

  /** Claims what fits and starts it; returns the started jobs' promises. */
  async function claimAndStart(): Promise<Promise<void>[]> {
    const room = concurrency - working
    if (room <= 0 || controller.signal.aborted) return []
    const jobs = await claimJobs(db, { kinds, limit: room, leaseMs, now: now() })
    // stop() began while this claim waited for the database: a step started now would never hear the
    // stop (its abort has fired already) and stop() would wait it out. Hand the jobs back instead.
    if (controller.signal.aborted) {
      await Promise.all(jobs.map((job) => releaseJob(db, job.id)))
      return []
    }
    return jobs.map((job) => {
      const running = execute(job).catch((error: unknown) =>
        log.error({ jobId: job.id, error: String(error) }, 'Job bookkeeping failed'),
      )
      inFlight.add(running)
      void running.finally(() => inFlight.delete(running))
      return running
    })
  }

  /** Claims one at a time (a poll and a notification never both fill the same free slots). */
  function claimNow(): Promise<Promise<void>[]> {
    const claimed = polling.then(claimAndStart)
    polling = claimed.catch((error: unknown) => {
      log.warn({ error: String(error) }, 'Claiming jobs failed')
    })
    return claimed
  }

  /** One claim queued at a time, however many slots free up meanwhile. */
  let claimQueued = false
  function claimSoon(): void {
    if (claimQueued || controller.signal.aborted) return
    claimQueued = true
    polling = polling
      .then(() => {
        claimQueued = false
        return claimAndStart()
      })
      .catch((error: unknown) => {
        log.warn({ error: String(error) }, 'Claiming jobs failed')
      })
  }

  function schedule(): void {
    if (controller.signal.aborted) return
    timer = setTimeout(() => {
      // Do not wait for the jobs themselves: a slow receipt must not hold up other due jobs.
      void claimNow()
        .catch(() => {})
        .finally(schedule)
    }, intervalMs)
    timer.unref()
  }

  if (kinds.length > 0) {
    schedule()
    if (options.listenUrl) {
      listener = listenForJobs({
        connectionString: options.listenUrl,
        // A notification is a wake-up, not a job: a burst of them (a hundred confirms in a second) makes
        // one claim of everything due, plus at most one more queued behind it, not a claim per job in series.
        onJob: (kind) => {
          if (kinds.includes(kind)) claimSoon()
        },
        onError: (error) =>
          log.warn({ error: String(error) }, 'Job notifications interrupted; polling meanwhile'),
      })
    }
  }
  return {
    async runOnce() {
      const started = await claimNow()
      await Promise.all(started)
      return started.length
    },
    async stop() {
      controller.abort()
      clearTimeout(timer)
      clearInterval(renewals)
      await listener?.close()
      await polling
      await Promise.all([...inFlight])
    },
  }
}

function jobSpanAttributes(job: JobRow) {
  return {
    'caipay.job.kind': job.kind,
    'caipay.job.attempt': job.attempts,
    'caipay.payment_id': job.payment_id,
  }
}

/** Extends these claims' leases; the ids still theirs (`attempts` counts claims: a re-claim is not). */
async function renewLeases(
  db: Db,
  jobs: readonly Pick<JobRow, 'id' | 'attempts'>[],
  leaseMs: number,
): Promise<Set<string>> {
  const result = await sql<{ id: string }>`
    UPDATE jobs SET locked_until = ${new Date(Date.now() + leaseMs)}
    FROM unnest(${jobs.map((j) => j.id)}::bigint[], ${jobs.map((j) => j.attempts)}::int[]) AS held(id, attempts)
    WHERE jobs.id = held.id AND jobs.attempts = held.attempts AND jobs.state = 'running'
    RETURNING jobs.id`.execute(db)
  return new Set(result.rows.map((row) => String(row.id)))
}

/** A stopping runner gives its claim back at once instead of letting the lease run out. */
async function releaseJob(db: Db, jobId: string): Promise<void> {
  await db
    .updateTable('jobs')
    .set({ state: 'pending', locked_until: null, updated_at: new Date() })
    .where('id', '=', jobId)
    .where('state', '=', 'running')
    .execute()
}
