import { runLibraryFlow } from '../flow.js'
import { type BenchCase, log, record, settings } from '../harness.js'

async function libraryPhase(): Promise<void> {
  const lib = await runLibraryFlow(settings.library)
  log(
    `library  createPayClient, in-process gateway     ${lib.microsecondsPerPayment.toFixed(0)} µs/payment, ` +
      `${lib.paymentsPerSecond.toFixed(0)} payments/s (${lib.payments} payments, ${lib.callsPerPayment} gateway calls each)`,
  )
  record('library.flow', lib.microsecondsPerPayment, 'µs/payment')
  record('library.flow.rate', lib.paymentsPerSecond, 'payments/s')
}

export default { name: 'library', order: 60, run: () => libraryPhase() } satisfies BenchCase
