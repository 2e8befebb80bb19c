import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RunningServer, startServer } from '../../src/server/server.js'
import { anvilPrivateKeys } from '../anvil.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv } from '../evm/support.js'
import { type PrometheusServer, startPrometheus } from './prometheusServer.js'

/**
 * A real Prometheus scrapes a running caipay (the API app, and a worker-only instance's metrics port on
 * the same database) while a live EIP-3009 payment is relayed and settled on Anvil, and what it stored
 * matches what happened on the chain and in the database.
 */
let env: EvmEnv
let buyer: Buyer
let prometheus: PrometheusServer
let worker: RunningServer
let caip2: string
let apiTarget: string
beforeAll(async () => {
  env = await createEvmEnv()
  caip2 = env.anvil.caip2
  buyer = await env.buyer(2)
  env.startRunner()
  await env.t.app.listen({ port: 0, host: '127.0.0.1' })
  const apiPort = (env.t.app.server.address() as AddressInfo).port
  // A worker-only instance on the same database: no HTTP, only its metrics port (no jobs claimed here:
  // the env's runner does the work, so this instance's counters stay at zero and its gauges are the database's).
  worker = await startServer({
    role: 'worker',
    databaseUrl: env.t.databaseUrl,
    config: env.t.app.config,
    metricsPort: 0,
    jobIntervalMs: 60_000,
  })
  const workerTarget = new URL(worker.metricsUrl!).host
  apiTarget = `127.0.0.1:${apiPort}`
  prometheus = await startPrometheus([apiTarget, workerTarget])
}, 60_000)
afterAll(async () => {
  await prometheus?.stop()
  await worker?.stop()
  await env?.close()
})

const one = async (expr: string) => {
  const rows = await prometheus.query(expr)
  expect(rows, expr).toHaveLength(1)
  return rows[0]!.value
}

describe('Prometheus scraping caipay during a live payment on Anvil', () => {
  it('stores what happened: the transitions, the settled balance, heads, no transaction left in flight', {
    timeout: 90_000,
  }, async () => {
    await prometheus.scrapedAfter(Date.now())
    const collectionBefore = await env.balance(env.collection)
    const { paymentId } = await confirmGasless(env, buyer, '1000')
    const final = await env.waitFinal(paymentId)
    expect(final.status).toBe('succeeded')
    await env.waitSettled(paymentId)
    const row = await env.t.db
      .selectFrom('payments')
      .select(['tx_id', 'settlement_tx_id'])
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(row.settlement_tx_id).toMatch(/^0x/)
    const receipt = await env.publicClient.getTransactionReceipt({
      hash: row.settlement_tx_id as `0x${string}`,
    })
    const after = Date.now()
    await prometheus.scrapedAfter(after)

    // Both targets live in this one test process and so show the same process counters: read the API's.
    const live = `instance="${apiTarget}",mode="live",chain="${caip2}"`
    expect(await one(`sum(caipay_payment_transitions_total{to="processing",${live}})`)).toBe(1)
    expect(await one(`sum(caipay_payment_transitions_total{to="succeeded",${live}})`)).toBe(1)
    expect(await one(`sum(caipay_payment_transitions_total{to="settled",${live}})`)).toBe(1)
    expect(
      await one(`sum(caipay_payment_transitions_total{to="failed",instance="${apiTarget}"}) or vector(0)`),
    ).toBe(0)
    // The buyer's confirm went through the API: one request on its route pattern, answered 200.
    expect(
      await one(
        `sum(caipay_http_request_duration_seconds_count{instance="${apiTarget}",route="/v1/gateway/payment/:id/confirm",status="200"})`,
      ),
    ).toBe(1)
    // Both instances read the same jobs table and chain.
    for (const instance of await prometheus.query('caipay_scrape_collector_up'))
      expect(instance.value).toBe(1)
    expect(await one(`max(caipay_transactions_in_flight{chain="${caip2}"})`)).toBe(0)
    expect(await one('max(caipay_jobs_queued{kind="evm.relay"})')).toBe(0)
    expect(await one(`min(caipay_chain_node_up{chain="${caip2}"})`)).toBe(1)
    expect(await one(`min(caipay_chain_node_head{chain="${caip2}"})`)).toBeGreaterThanOrEqual(
      Number(receipt.blockNumber),
    )
    // The collection address kept the fee-less payment only until settlement forwarded it: what Prometheus
    // stored is what the token says now (balances are cached 10 s: wait out one cache period).
    await new Promise((resolve) => setTimeout(resolve, 10_500))
    await prometheus.scrapedAfter(Date.now())
    const collectionNow = await env.balance(env.collection)
    expect(collectionNow).toBe(collectionBefore)
    expect(await one(`max(caipay_collection_balance{chain="${caip2}",symbol="USDC"})`)).toBe(
      Number(collectionNow) / 1e6,
    )
    const native = await env.publicClient.getBalance({ address: env.collection })
    expect(await one(`max(caipay_executor_native_balance{chain="${caip2}"})`)).toBeCloseTo(
      Number(native) / 1e18,
      6,
    )
  })
})

describe('caipay status', () => {
  it('shows the chain, the executor balances, no job waiting and no failing endpoint (--json)', {
    timeout: 60_000,
  }, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'caipay-status-'))
    try {
      const config = path.join(dir, 'caipay.json')
      await writeFile(
        config,
        JSON.stringify({
          chains: {
            [caip2]: {
              rpcUrl: env.anvil.rpcUrl,
              signerKey: anvilPrivateKeys[1],
              assets: { [env.asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
            },
          },
        }),
      )
      const bin = fileURLToPath(new URL('../../bin/caipay.js', import.meta.url))
      const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [
          bin,
          'status',
          '--json',
          '--config',
          config,
          '--database-url',
          env.t.databaseUrl,
        ])
        let stdout = ''
        let stderr = ''
        child.stdout.on('data', (d) => (stdout += d))
        child.stderr.on('data', (d) => (stderr += d))
        child.on('exit', (code) => resolve({ code, stdout, stderr }))
      })
      expect(result.code, result.stderr).toBe(0)
      const status = JSON.parse(result.stdout)
      const head = await env.publicClient.getBlockNumber()
      expect(status.chains).toEqual([
        {
          chain: caip2,
          unit: 'block',
          nodes: [{ node: '0', head: Number(head) }],
          balances: {
            address: env.collection,
            native: Number(await env.publicClient.getBalance({ address: env.collection })) / 1e18,
            collection: [
              { asset: env.asset, symbol: 'USDC', value: Number(await env.balance(env.collection)) / 1e6 },
            ],
          },
        },
      ])
      expect(status.jobs).toContainEqual({ kind: 'evm.relay', queued: 0, running: 0, oldestDueSeconds: 0 })
      expect(status.transactionsInFlight).toEqual([{ chain: caip2, executor: env.collection, count: 0 }])
      expect(status.webhooks.failingEndpoints).toEqual([])
      // No secret of the configuration reaches the output.
      expect(result.stdout).not.toContain(anvilPrivateKeys[1]!.slice(2))
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})
