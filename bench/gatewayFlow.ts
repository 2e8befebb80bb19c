/**
 * The whole test-mode gateway flow over HTTP, as wallets do it: N concurrent wallets (one keep-alive
 * connection each, a wallet-role Api-Key) pay pre-created payments one after another:
 *   options (one EVM account) -> fetch -> confirm (a 65-byte hex signature, Idempotency-Key) -> status
 *   until final.
 * Test mode accepts form-valid results, so nothing is signed for real and no chain is touched: what is
 * measured is the service. The payments are created beforehand (creation is measured apart).
 * Runs in its own process (`runGatewayFlow` forks it).
 */
import { randomBytes } from 'node:crypto'
import { isJobChild, runJob, serveJob } from './child.js'
import { jsonClient } from './http.js'
import { percentile } from './load.js'

export interface GatewayFlowSpec {
  url: string
  /** Wallet-role key the wallets use. */
  walletKey: string
  wallets: number
  /** Payments to pay, created beforehand: the first `warmup` ones unmeasured, then the measured ones. */
  paymentIds: string[]
  warmup: number
}

export interface GatewayFlowResult {
  paymentsPerSecond: number
  /** Milliseconds from the options call to the final status, per payment. */
  p50: number
  p99: number
  /** HTTP requests per payment (status polls included). */
  requestsPerPayment: number
  payments: number
  wallets: number
  /** Per-step median, milliseconds. */
  steps: Record<'options' | 'fetch' | 'confirm' | 'status', number>
}

export function runGatewayFlow(spec: GatewayFlowSpec): Promise<GatewayFlowResult> {
  return runJob<GatewayFlowResult>('gatewayFlow.ts', spec)
}

interface OptionsAnswer {
  options: { id: string; actions: unknown[] }[]
}
interface StatusAnswer {
  status: string
  isFinal: boolean
  pollInMs: number | null
}

const now = () => Number(process.hrtime.bigint()) / 1e6

async function gatewayFlow(spec: GatewayFlowSpec): Promise<GatewayFlowResult> {
  const warmupIds = spec.paymentIds.slice(0, spec.warmup)
  const measuredIds = spec.paymentIds.slice(spec.warmup)
  const steps = {
    options: [] as number[],
    fetch: [] as number[],
    confirm: [] as number[],
    status: [] as number[],
  }
  const latencies: number[] = []
  let requests = 0

  const pay = async (wallet: ReturnType<typeof jsonClient>, account: string, id: string, record: boolean) => {
    const base = `/v1/gateway/payment/${id}`
    const expect = <T>(step: string, res: { status: number; body: T }) => {
      if (res.status !== 200) throw new Error(`${step} ${id}: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body
    }
    const t0 = now()
    const options = expect(
      'options',
      await wallet.request<OptionsAnswer>('POST', `${base}/options`, { accounts: [account] }),
    )
    const t1 = now()
    const optionId = options.options[0]!.id
    const fetched = expect(
      'fetch',
      await wallet.request<{ actions: unknown[] }>('POST', `${base}/fetch`, { optionId, data: '' }),
    )
    const t2 = now()
    const results = fetched.actions.map(() => `0x${randomBytes(65).toString('hex')}`)
    let status = expect(
      'confirm',
      await wallet.request<StatusAnswer>(
        'POST',
        `${base}/confirm`,
        { optionId, results },
        {
          'idempotency-key': `flow-${id}-confirm`,
        },
      ),
    )
    const t3 = now()
    let calls = 4
    do {
      if (status.pollInMs && !status.isFinal) await new Promise((r) => setTimeout(r, status.pollInMs!))
      status = expect('status', await wallet.request<StatusAnswer>('GET', `${base}/status`))
    } while (!status.isFinal && calls++ < 100)
    const t4 = now()
    if (status.status !== 'succeeded') throw new Error(`payment ${id} ended ${status.status}`)
    if (!record) return
    requests += calls
    latencies.push(t4 - t0)
    steps.options.push(t1 - t0)
    steps.fetch.push(t2 - t1)
    steps.confirm.push(t3 - t2)
    steps.status.push(t4 - t3)
  }

  const run = async (ids: readonly string[], record: boolean) => {
    const queue = [...ids].reverse()
    await Promise.all(
      Array.from({ length: spec.wallets }, async () => {
        const wallet = jsonClient(spec.url, { 'api-key': spec.walletKey })
        const account = `eip155:8453:0x${randomBytes(20).toString('hex')}`
        for (let id = queue.pop(); id !== undefined; id = queue.pop()) await pay(wallet, account, id, record)
        wallet.close()
      }),
    )
  }
  await run(warmupIds, false)
  const started = now()
  await run(measuredIds, true)
  const seconds = (now() - started) / 1000

  const median = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      0.5,
    )
  latencies.sort((a, b) => a - b)
  return {
    paymentsPerSecond: measuredIds.length / seconds,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    requestsPerPayment: requests / measuredIds.length,
    payments: measuredIds.length,
    wallets: spec.wallets,
    steps: {
      options: median(steps.options),
      fetch: median(steps.fetch),
      confirm: median(steps.confirm),
      status: median(steps.status),
    },
  }
}

if (isJobChild(import.meta.url)) serveJob(gatewayFlow)
