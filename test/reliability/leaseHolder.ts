/**
 * A job runner in its own process for instances.test.ts (run with `node --import tsx`): it claims
 * `lease.probe` jobs with the default lease and never finishes them, so the test can SIGKILL it while
 * it holds one. Prints `claimed <jobId>` for each claim.
 */
import { startJobRunner } from '../../src/server/jobs/runner.js'
import { createDb } from '../../src/server/store/db.js'

const databaseUrl = process.argv[2]
if (!databaseUrl) throw new Error('usage: leaseHolder.ts DATABASE_URL')
const db = createDb(databaseUrl, 2)
startJobRunner({
  db,
  intervalMs: 100,
  log: {
    info() {},
    warn: (object, message) => process.stderr.write(`${message} ${JSON.stringify(object)}\n`),
    error: (object, message) => process.stderr.write(`${message} ${JSON.stringify(object)}\n`),
  },
  handlers: {
    'lease.probe': {
      run: (job) => {
        process.stdout.write(`claimed ${job.id}\n`)
        return new Promise(() => {})
      },
    },
  },
})
// The runner's timers do not hold the process open; this does, until the test kills it.
setInterval(() => {}, 60_000)
process.stdout.write('ready\n')
