/**
 * Refund latency, POST /v1/refunds to `succeeded` as a merchant polling GET /v1/refunds/{id} sees it: test
 * mode (simulated transfer, sandboxRefundDelayMs 0) and live EVM on Anvil (automine, one confirmation, a
 * funded float). Not part of npm test; run: npx vitest run --config bench/refundLatency.config.ts
 */
import { it } from 'vitest'
import { startJobRunner } from '../src/server/jobs/runner.js'
import { mintTestToken } from '../test/anvil.js'
import { confirmGasless, createEvmEnv, fastRuntime, usdc } from '../test/evm/support.js'
import { createTestServer } from '../test/server/harness.js'
import { createMerchant, createPayment, headers, succeedPayment } from '../test/server/helpers.js'

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

it('test-mode latency', { timeout: 120_000 }, async () => {
  const t = await createTestServer({ config: { sandboxRefundDelayMs: 0 } })
  const key = (await t.createKey('test')).apiKey
  const m = await createMerchant(t, key)
  const runner = startJobRunner({
    db: t.db,
    handlers: t.app.jobHandlers,
    intervalMs: 500,
    listenUrl: t.databaseUrl,
  })
  const create: number[] = []
  const done: number[] = []
  for (let i = 0; i < 30; i++) {
    const id = await createPayment(t, key, m)
    await succeedPayment(t, id)
    const start = performance.now()
    const res = await t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(key, m),
      payload: { paymentId: id },
    })
    create.push(performance.now() - start)
    for (;;) {
      const r = await t.request({
        method: 'GET',
        url: `/v1/refunds/${res.json.refundId}`,
        headers: headers(key, m),
      })
      if (r.json.status === 'succeeded') break
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    done.push(performance.now() - start)
  }
  console.log(
    `TEST MODE (sandboxRefundDelayMs 0): POST 201 median ${median(create).toFixed(1)} ms; to succeeded median ${median(done).toFixed(1)} ms, max ${Math.max(...done).toFixed(1)} ms`,
  )
  await runner.stop()
  await t.close()
})

it('live EVM latency (Anvil, automine)', { timeout: 120_000 }, async () => {
  const env = await createEvmEnv()
  const buyer = await env.buyer(2, usdc(1000))
  await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(500))
  const runner = env.startRunner(fastRuntime(env).jobHandlers)
  const done: number[] = []
  for (let i = 0; i < 10; i++) {
    const { paymentId } = await confirmGasless(env, buyer, '100')
    await env.waitJob(paymentId, 'evm.settle')
    const start = performance.now()
    const res = await env.t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(env.liveKey, env.merchant.id),
      payload: { paymentId },
    })
    for (;;) {
      const r = await env.t.request({
        method: 'GET',
        url: `/v1/refunds/${res.json.refundId}`,
        headers: headers(env.liveKey, env.merchant.id),
      })
      if (r.json.status === 'succeeded') break
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    done.push(performance.now() - start)
  }
  console.log(
    `LIVE EVM (Anvil automine, 1 confirmation, 25 ms polling): POST to succeeded median ${median(done).toFixed(1)} ms, max ${Math.max(...done).toFixed(1)} ms`,
  )
  await runner.stop()
  await env.close()
})
