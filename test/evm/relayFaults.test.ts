import { createWalletClient, encodeFunctionData, type Hex, http, parseGwei, parseTransaction } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import { createEvmRuntime } from '../../src/server/chains/evm/index.js'
import type { ServerConfig } from '../../src/server/config.js'
import type { JobRunner } from '../../src/server/jobs/runner.js'
import { processRegistry } from '../../src/server/metrics/counters.js'
import { type AnvilControl, anvilChain, anvilControl, anvilPrivateKeys } from '../anvil.js'
import { type FaultProxy, type JsonRpcResponse, startFaultProxy } from '../rpcFaults.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv, relayRows, usdc } from './support.js'

/**
 * Relay faults on a real Anvil node. A relay that does not get mined: the executor replaces it (same nonce, higher fees) after
 * `feeBumpAfterMs`, within `maxFeePerGasGwei`, keeps every hash, and whichever one is mined is the
 * payment's transaction. Anvil is the node: mining stopped (stuck in the pool) or a base fee raised past
 * the relay's cap (Anvil then evicts it: dropped for its fees).
 */
let env: EvmEnv
let buyer: Buyer
let control: AnvilControl
let runner: JobRunner | undefined

/** This process's count of `name` for the test chain (docs/operations.md, "Metrics"). */
async function counted(name: string): Promise<number> {
  const metric = await processRegistry.getSingleMetric(name)!.get()
  return metric.values.find((value) => value.labels.chain === env.anvil.caip2)?.value ?? 0
}

beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(2)
  control = anvilControl(env.anvil.rpcUrl)
})
// Every test charges the buyer 10 USDC: top up before the balance no longer covers a payment.
beforeEach(async () => {
  if ((await env.balance(buyer.address)) < usdc(20)) buyer = await env.buyer(2)
})
afterAll(async () => {
  await runner?.stop()
  await env?.close()
})

/** One runner at a time: the previous test's (other settings) is stopped first. */
async function startRunner(
  chainOverrides: Record<string, unknown>,
  runtimeOptions: { receiptTimeoutMs?: number } = {},
) {
  await runner?.stop()
  const config = env.t.app.config
  const chains = Object.fromEntries(
    Object.entries(config.chains).map(([caip2, chain]) => [caip2, { ...chain, ...chainOverrides }]),
  )
  const runtime = createEvmRuntime({
    config: { ...config, chains } as ServerConfig,
    db: env.t.db,
    pollingIntervalMs: 25,
    ...runtimeOptions,
  })
  runner = env.startRunner(runtime.jobHandlers)
  return runner
}

async function until<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** The payment's first relay row once the node has its receipt, with the receipt. */
function relayMined(paymentId: string) {
  return until(async () => {
    const [row] = await relayRows(env, paymentId)
    if (!row) return undefined
    const receipt = await env.publicClient
      .getTransactionReceipt({ hash: row.hash as Hex })
      .catch(() => undefined)
    return receipt ? ([row, receipt] as const) : undefined
  }, 'the relay to be mined')
}

const fees = (raw: string) => {
  const tx = parseTransaction(raw as Hex)
  return { nonce: tx.nonce, maxFeePerGas: tx.maxFeePerGas!, maxPriorityFeePerGas: tx.maxPriorityFeePerGas! }
}

describe('EVM relay fee bumping', () => {
  it('a relay stuck in the pool is replaced with higher fees on the same nonce after feeBumpAfterMs, and the replacement is the payment transaction', async () => {
    const { paymentId } = await confirmGasless(env, buyer)
    const before = await env.balance(buyer.address)
    const bumpsBefore = await counted('caipay_fee_bumps_total')
    await control.setAutomine(false)
    try {
      await startRunner({ feeBumpAfterMs: 1_000 })
      const [first] = await until(async () => {
        const rows = await relayRows(env, paymentId)
        return rows.length > 0 ? rows : undefined
      }, 'the relay')
      const sentAt = first!.created_at.getTime()
      const rows = await until(async () => {
        const all = await relayRows(env, paymentId)
        return all.length > 1 ? all : undefined
      }, 'the replacement')
      const replacement = rows[1]!
      expect(replacement.created_at.getTime() - sentAt).toBeGreaterThanOrEqual(1_000)
      expect(fees(replacement.raw).nonce).toBe(fees(first!.raw).nonce)
      expect(fees(replacement.raw).maxFeePerGas).toBeGreaterThan(fees(first!.raw).maxFeePerGas)
      expect(fees(replacement.raw).maxPriorityFeePerGas).toBeGreaterThan(
        fees(first!.raw).maxPriorityFeePerGas,
      )
      // The node soon holds only the replacement for that nonce (it is recorded before it is sent).
      const pending = await until(async () => {
        const hashes = await control.pending()
        return hashes.includes(replacement.hash as Hex) ? hashes : undefined
      }, 'the replacement in the pool')
      expect(pending).not.toContain(first!.hash)
    } finally {
      await control.setAutomine(true)
      await control.mine(1)
    }
    const final = await env.waitFinal(paymentId)
    expect(final.status).toBe('succeeded')
    const rows = await relayRows(env, paymentId)
    const mined = rows.filter((r) => r.status === 'succeeded')
    expect(mined).toHaveLength(1)
    const payment = await env.t.db
      .selectFrom('payments')
      .select('tx_id')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(payment.tx_id).toBe(mined[0]!.hash)
    expect(rows.filter((r) => r.status === 'sent')).toHaveLength(0)
    // Every replacement recorded is a fee bump counted.
    expect((await counted('caipay_fee_bumps_total')) - bumpsBefore).toBe(rows.length - 1)
    expect((await env.balance(buyer.address)) - before).toBe(-usdc(10))
    await env.waitSettled(paymentId)
    await runner?.stop()
    runner = undefined
  }, 60_000)

  it('a relay dropped for its fees (base fee raised past its cap) is replaced and mined; reports the time from drop to replacement mined', async () => {
    const { paymentId } = await confirmGasless(env, buyer)
    const before = await env.balance(buyer.address)
    await control.setAutomine(false)
    await startRunner({ feeBumpAfterMs: 1_000 })
    const [first] = await until(async () => {
      const rows = await relayRows(env, paymentId)
      return rows.length > 0 ? rows : undefined
    }, 'the relay')
    // Fees jump past the relay's cap; the next block leaves it out and Anvil evicts it.
    await control.setNextBaseFee(fees(first!.raw).maxFeePerGas * 4n)
    await control.mine(1)
    const droppedAt = Date.now()
    await control.setAutomine(true)
    const final = await env.waitFinal(paymentId)
    const minedAfterMs = Date.now() - droppedAt
    process.stdout.write(
      `relay dropped for fees -> replacement mined: ${minedAfterMs} ms (feeBumpAfterMs 1000)\n`,
    )
    expect(final.status).toBe('succeeded')
    const rows = await relayRows(env, paymentId)
    expect(rows.length).toBeGreaterThan(1)
    const mined = rows.find((r) => r.status === 'succeeded')!
    expect(mined.hash).not.toBe(first!.hash)
    expect(fees(mined.raw).nonce).toBe(fees(first!.raw).nonce)
    expect((await env.balance(buyer.address)) - before).toBe(-usdc(10))
    await env.waitSettled(paymentId)
    await runner?.stop()
    runner = undefined
  }, 60_000)

  it('with the default settings (feeBumpAfterMs 20 s, receipts polled every second, 30 s per run) a relay dropped for its fees is replaced and mined once; prints the time from the base-fee jump to the replacement mined', async () => {
    await runner?.stop()
    const { paymentId } = await confirmGasless(env, buyer)
    const before = await env.balance(buyer.address)
    await control.setAutomine(false)
    runner = env.startRunner(createEvmRuntime({ config: env.t.app.config, db: env.t.db }).jobHandlers)
    const [first] = await until(async () => {
      const rows = await relayRows(env, paymentId)
      return rows.length > 0 ? rows : undefined
    }, 'the relay')
    await control.setNextBaseFee(fees(first!.raw).maxFeePerGas * 4n)
    await control.mine(1)
    const raisedAt = Date.now()
    await control.setAutomine(true)
    const final = await env.waitFinal(paymentId, 45_000)
    const minedAfterMs = Date.now() - raisedAt
    const sentToRaiseMs = raisedAt - first!.created_at.getTime()
    process.stdout.write(
      `default settings: base fee raised past the relay's cap -> replacement mined in ${minedAfterMs} ms (relay sent ${sentToRaiseMs} ms before the raise)\n`,
    )
    expect(final.status).toBe('succeeded')
    const rows = await relayRows(env, paymentId)
    const mined = rows.filter((r) => r.status === 'succeeded')
    expect(mined).toHaveLength(1)
    expect(mined[0]!.hash).not.toBe(first!.hash)
    expect(fees(mined[0]!.raw).nonce).toBe(fees(first!.raw).nonce)
    expect((await env.balance(buyer.address)) - before).toBe(-usdc(10))
    await env.waitSettled(paymentId)
    await runner?.stop()
    runner = undefined
  }, 60_000)

  it('never bumps past maxFeePerGasGwei: at the cap the relay stays pending with its hash recorded, and lands when mining resumes', async () => {
    const { paymentId } = await confirmGasless(env, buyer)
    await control.setAutomine(false)
    try {
      const [first] = await (async () => {
        await startRunner({ feeBumpAfterMs: 1_000, maxFeePerGasGwei: 0.000001 })
        return until(async () => {
          const rows = await relayRows(env, paymentId)
          return rows.length > 0 ? rows : undefined
        }, 'the relay')
      })()
      // Three bump periods: no replacement, since the cap is below what it already pays.
      await new Promise((resolve) => setTimeout(resolve, 3_500))
      const rows = await relayRows(env, paymentId)
      expect(rows).toHaveLength(1)
      expect(fees(first!.raw).maxFeePerGas).toBeGreaterThan(parseGwei('0.000001'))
      const payment = await env.t.db
        .selectFrom('payments')
        .select('status')
        .where('id', '=', paymentId)
        .executeTakeFirstOrThrow()
      expect(payment.status).toBe('processing')
    } finally {
      await control.setAutomine(true)
      await control.mine(1)
    }
    expect((await env.waitFinal(paymentId)).status).toBe('succeeded')
    await env.waitSettled(paymentId)
  }, 60_000)

  it('a relay whose broadcast was lost (hash answered, never sent) keeps its nonce: the next payment takes the following one, and both land once', async () => {
    const proxy = await startFaultProxy(env.anvil.rpcUrl)
    const second = await env.buyer(3)
    try {
      const before = [await env.balance(buyer.address), await env.balance(second.address)]
      proxy.inject('eth_sendRawTransaction', { kind: 'drop' }, { times: 1 })
      await startRunner({ rpcUrl: proxy.url, feeBumpAfterMs: 1_000 })
      const a = await confirmGasless(env, buyer)
      const [lost] = await until(async () => {
        const rows = await relayRows(env, a.paymentId)
        return rows.length > 0 ? rows : undefined
      }, 'the lost relay')
      // Recorded before it is sent: wait for the send the proxy swallows.
      await until(
        async () => (proxy.calls('eth_sendRawTransaction') >= 1 ? true : undefined),
        'the lost send',
      )
      const b = await confirmGasless(env, second)
      const [finalA, finalB] = await Promise.all([env.waitFinal(a.paymentId), env.waitFinal(b.paymentId)])
      expect([finalA.status, finalB.status]).toEqual(['succeeded', 'succeeded'])
      const [rowA] = (await relayRows(env, a.paymentId)).filter((r) => r.status === 'succeeded')
      const [rowB] = (await relayRows(env, b.paymentId)).filter((r) => r.status === 'succeeded')
      expect(rowA!.hash).toBe(lost!.hash)
      expect(rowB!.nonce).not.toBe(rowA!.nonce)
      expect(await env.balance(buyer.address)).toBe(before[0]! - usdc(10))
      expect(await env.balance(second.address)).toBe(before[1]! - usdc(10))
      await Promise.all([env.waitSettled(a.paymentId), env.waitSettled(b.paymentId)])
    } finally {
      await runner?.stop()
      runner = undefined
      await proxy.stop()
    }
  }, 60_000)

  it('with confirmations 3 a mined relay leaves the payment processing until two more blocks, then it succeeds and settles', async () => {
    const { paymentId } = await confirmGasless(env, buyer)
    await startRunner({ confirmations: 3 })
    try {
      const [, mined] = await relayMined(paymentId)
      // Automine: no block comes without a transaction, so the relay stays under three confirmations.
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      const waiting = await env.t.db
        .selectFrom('payments')
        .select('status')
        .where('id', '=', paymentId)
        .executeTakeFirstOrThrow()
      const depth = (await control.blockNumber()) - mined.blockNumber + 1n
      expect(depth).toBeLessThan(3n)
      expect(waiting.status).toBe('processing')
      await control.mine(Number(3n - depth))
      expect((await env.waitFinal(paymentId)).status).toBe('succeeded')
      // The settlement waits for its confirmations too: blocks keep coming until it is recorded.
      const settled = until(async () => {
        const row = await env.t.db
          .selectFrom('payments')
          .select('settlement_status')
          .where('id', '=', paymentId)
          .executeTakeFirstOrThrow()
        if (row.settlement_status === 'succeeded') return true
        await control.mine(1)
        await new Promise((resolve) => setTimeout(resolve, 150))
        return undefined
      }, 'the settlement')
      expect(await settled).toBe(true)
    } finally {
      await runner?.stop()
      runner = undefined
    }
  }, 60_000)
  it('with confirmations 3 a reorg that removes the mined relay before that depth leaves the payment processing; the same signed relay lands again and the payment succeeds with the buyer debited once', async () => {
    const before = await env.balance(buyer.address)
    const reorgsBefore = await counted('caipay_chain_reorgs_seen_total')
    const { paymentId } = await confirmGasless(env, buyer)
    await startRunner({ confirmations: 3 }, { receiptTimeoutMs: 1_000 })
    try {
      const [relay, mined] = await relayMined(paymentId)
      // The watcher looks again within a poll (no block comes meanwhile: the relay stays short of its
      // depth) and sees the receipt, which the reorg then takes away.
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      const depth = (await control.blockNumber()) - mined.blockNumber + 1n
      await control.reorg(Number(depth))
      await expect(env.publicClient.getTransactionReceipt({ hash: relay.hash as Hex })).rejects.toThrow()
      expect(await env.balance(buyer.address)).toBe(before)
      const waiting = await env.t.db
        .selectFrom('payments')
        .select('status')
        .where('id', '=', paymentId)
        .executeTakeFirstOrThrow()
      expect(waiting.status).toBe('processing')
      // Blocks keep coming until the relay is back on chain and three deep.
      const final = await until(
        async () => {
          const row = await env.t.db
            .selectFrom('payments')
            .select(['status', 'settlement_status'])
            .where('id', '=', paymentId)
            .executeTakeFirstOrThrow()
          if (row.status !== 'processing' && row.settlement_status === 'succeeded') return row
          await control.mine(1)
          await new Promise((resolve) => setTimeout(resolve, 150))
          return undefined
        },
        'the payment after the reorg',
        40_000,
      )
      expect(final.status).toBe('succeeded')
      const landed = (await relayRows(env, paymentId)).filter((r) => r.status === 'succeeded')
      expect(landed.map((r) => r.hash)).toEqual([relay.hash])
      expect(await env.balance(buyer.address)).toBe(before - usdc(10))
      // The watcher had seen the relay's receipt short of its confirmations, then saw it gone.
      expect((await counted('caipay_chain_reorgs_seen_total')) - reorgsBefore).toBeGreaterThanOrEqual(1)
    } finally {
      await runner?.stop()
      runner = undefined
    }
  }, 60_000)
})

/** The executor's key used by another process (a second service, an operator's script) on the same node. */
function executorElsewhere() {
  const account = privateKeyToAccount(anvilPrivateKeys[1])
  return createWalletClient({
    account,
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
  })
}

/** An eth_fillTransaction answer whose gas is 21,000: too little for any token call. */
function lowGas(answer: JsonRpcResponse): JsonRpcResponse {
  return { ...answer, result: '0x5208' }
}

function txRows(paymentId: string, purpose: 'relay' | 'settle') {
  return env.t.db
    .selectFrom('evm_transactions')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', purpose)
    .orderBy('id')
    .execute()
}

/** Moves whatever earlier tests left at the collection address elsewhere: its balance is zero after. */
async function emptyCollection() {
  const held = await env.balance(env.collection)
  if (held === 0n) return
  const hash = await executorElsewhere().sendTransaction({
    to: env.token,
    data: encodeFunctionData({
      abi: testUsdcAbi,
      functionName: 'transfer',
      args: [privateKeyToAccount(generatePrivateKey()).address, held],
    }),
  })
  expect((await env.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success')
  expect(await env.balance(env.collection)).toBe(0n)
}

async function jobOf(paymentId: string, kind: string) {
  return env.t.db
    .selectFrom('jobs')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('kind', '=', kind)
    .executeTakeFirstOrThrow()
}

async function paymentRow(paymentId: string) {
  return env.t.db.selectFrom('payments').selectAll().where('id', '=', paymentId).executeTakeFirstOrThrow()
}

/** Runs `body` against a fault proxy in front of Anvil; stops the test's runner and the proxy after. */
async function withProxy(body: (proxy: FaultProxy) => Promise<void>): Promise<void> {
  const proxy = await startFaultProxy(env.anvil.rpcUrl)
  try {
    await body(proxy)
  } finally {
    await runner?.stop()
    runner = undefined
    await proxy.stop()
  }
}

/**
 * The payment succeeded with one relay transaction mined (any others dropped), the buyer was charged
 * once, and the settlement ran. Returns the relay rows.
 */
async function paidOnce(paymentId: string, before: bigint) {
  const final = await env.waitFinal(paymentId)
  expect(final.status).toBe('succeeded')
  const rows = await relayRows(env, paymentId)
  expect(rows.filter((r) => r.status === 'succeeded').map((r) => r.hash)).toEqual([final.txId])
  expect(rows.filter((r) => r.status === 'sent')).toHaveLength(0)
  expect((await env.balance(buyer.address)) - before).toBe(-usdc(10))
  await env.waitSettled(paymentId)
  return rows
}

/** The relay job's next attempt now rather than after the runner's backoff (up to a minute). */
function relayDueNow(paymentId: string, attempts?: number) {
  return env.t.db
    .updateTable('jobs')
    .set({ run_at: new Date(0), ...(attempts !== undefined ? { attempts } : {}) })
    .where('payment_id', '=', paymentId)
    .where('kind', '=', 'evm.relay')
    .where('state', '=', 'pending')
    .execute()
}

/** Waits until the relay job is back to pending after at least `attempts` claims (never given up). */
function relayRetried(paymentId: string, attempts: number, meanwhile?: () => void) {
  return until(async () => {
    meanwhile?.()
    const job = await jobOf(paymentId, 'evm.relay')
    expect(job.state, 'the relay job gave up').not.toBe('failed')
    return job.state === 'pending' && job.attempts >= attempts ? job : undefined
  }, `relay attempt ${attempts} to be handed back`)
}

describe('EVM relay answers the node refuses', () => {
  it("a relay answered 'nonce too low' (another sender of the executor key took its nonce first) is re-signed on a fresh nonce and the payer is charged once", async () => {
    await withProxy(async (proxy) => {
      const before = await env.balance(buyer.address)
      // The relay's send waits in the proxy while the other process uses that nonce on the node itself.
      proxy.hold('eth_sendRawTransaction')
      await startRunner({ rpcUrl: proxy.url })
      const { paymentId } = await confirmGasless(env, buyer)
      const [first] = await until(async () => {
        const rows = await relayRows(env, paymentId)
        return rows.length > 0 && proxy.held() > 0 ? rows : undefined
      }, 'the held relay send')
      const other = await executorElsewhere().sendTransaction({
        to: env.collection,
        value: 0n,
        nonce: Number(first!.nonce),
      })
      expect((await env.publicClient.waitForTransactionReceipt({ hash: other })).status).toBe('success')
      proxy.release('eth_sendRawTransaction')

      const rows = await paidOnce(paymentId, before)
      expect(rows.map((r) => r.status)).toEqual(['dropped', 'succeeded'])
      expect(BigInt(rows[1]!.nonce)).toBeGreaterThan(BigInt(first!.nonce))
      expect((await jobOf(paymentId, 'evm.relay')).last_error).toMatch(/nonce too low/i)
    })
  }, 60_000)

  it("a fee bump answered 'replacement transaction underpriced' is bumped again on the next look; one of the nonce's transactions lands and the payer is charged once", async () => {
    await withProxy(async (proxy) => {
      const before = await env.balance(buyer.address)
      let paymentId = ''
      await control.setAutomine(false)
      try {
        await startRunner({ rpcUrl: proxy.url, feeBumpAfterMs: 1_000 })
        paymentId = (await confirmGasless(env, buyer)).paymentId
        await until(async () => {
          const rows = await relayRows(env, paymentId)
          return rows.length > 0 && proxy.calls('eth_sendRawTransaction') > 0 ? true : undefined
        }, 'the relay in the pool')
        // The first replacement and its re-send are refused as too cheap (a node demanding a larger step).
        proxy.inject(
          'eth_sendRawTransaction',
          { kind: 'error', code: -32000, message: 'replacement transaction underpriced' },
          { times: 2 },
        )
        const rows = await until(async () => {
          const all = await relayRows(env, paymentId)
          return all.length >= 3 ? all : undefined
        }, 'a second replacement')
        expect(rows.every((r) => r.nonce === rows[0]!.nonce)).toBe(true)
        for (let i = 1; i < rows.length; i++) {
          expect(fees(rows[i]!.raw).maxFeePerGas).toBeGreaterThan(fees(rows[i - 1]!.raw).maxFeePerGas)
        }
        // The refused replacement never reached the node; the original was replaced by the next one
        // (recorded before it is broadcast: wait for the node to hold it).
        const pending = await until(async () => {
          const later = (await relayRows(env, paymentId)).slice(2).map((r) => r.hash)
          const held = await control.pending()
          return held.some((hash) => later.includes(hash)) ? held : undefined
        }, 'a later replacement in the pool')
        expect(pending).not.toContain(rows[1]!.hash)
        expect(pending).not.toContain(rows[0]!.hash)
      } finally {
        await control.setAutomine(true)
        await control.mine(1)
      }
      await paidOnce(paymentId, before)
    })
  }, 60_000)
})

describe('EVM relay gas', () => {
  it('a relay estimated while the collection address held tokens and mined after a settlement emptied it (the balance going from zero to non-zero costs 17,100 gas more than estimated) succeeds with its one transaction: gas limits leave headroom', async () => {
    await runner?.stop()
    runner = undefined
    await emptyCollection()
    const before = await env.balance(buyer.address)
    const first = await confirmGasless(env, buyer)
    let second = ''
    await withProxy(async (proxy) => {
      await control.setAutomine(false)
      try {
        // Receipts are waited for within a job's run (30 s), not after a retry's backoff; no fee bump
        // replaces a recorded transaction within the test's time.
        await startRunner({ rpcUrl: proxy.url, feeBumpAfterMs: 120_000 })
        // In the pool, not only recorded (a row is written before its broadcast).
        await until(async () => {
          const [relay] = await relayRows(env, first.paymentId)
          return relay && (await control.pending()).includes(relay.hash as Hex) ? true : undefined
        }, 'relay 1 in the pool')
        // Relay 2 must be estimated on its own chain state, not share relay 1's estimate (the sender
        // shares one per call shape for max(100 ms, the polling interval)).
        await new Promise((resolve) => setTimeout(resolve, 150))
        // From here the node gets no send from the server: the settlement that relay 1's success queues
        // is recorded and never reaches the node's pool, so relay 2 is estimated on a chain (and a pool)
        // where the first payment's tokens are still collected.
        proxy.inject('eth_sendRawTransaction', { kind: 'drop' })
        await control.mine(1)
        const settle = await until(
          async () => (await txRows(first.paymentId, 'settle'))[0],
          'the first payment’s settlement',
        )
        second = (await confirmGasless(env, buyer)).paymentId
        // Recorded after its estimate, and its broadcast seen (and dropped) by the proxy.
        const relay = await until(async () => {
          const [row] = await relayRows(env, second)
          const sent = proxy.params('eth_sendRawTransaction').some((p) => (p as Hex[])[0] === row?.raw)
          return sent ? row : undefined
        }, 'relay 2 signed and sent')
        expect(await env.balance(env.collection)).toBe(usdc(10))
        expect(await control.pending()).not.toContain(settle.hash)
        expect(BigInt(settle.nonce)).toBeLessThan(BigInt(relay.nonce))
        // The node gets the recorded bytes only now (what a re-broadcast sends): both in one block, the
        // settlement first by its nonce, so relay 2 runs on an emptied collection address.
        for (const row of [settle, relay])
          await env.publicClient.sendRawTransaction({ serializedTransaction: row.raw as Hex })
        await control.mine(1)
        const [settled, relayed] = await Promise.all(
          [settle, relay].map((row) => env.publicClient.getTransactionReceipt({ hash: row.hash as Hex })),
        )
        expect(relayed!.blockNumber).toBe(settled!.blockNumber)
        expect(relayed!.transactionIndex).toBeGreaterThan(settled!.transactionIndex)
        proxy.clear()
      } finally {
        await control.setAutomine(true)
        await control.mine(1)
      }
      expect((await env.waitFinal(second)).status).toBe('succeeded')
      await env.waitSettled(second)
    })
    const rows = await relayRows(env, second)
    expect(rows.map((r) => r.status)).toEqual(['succeeded'])
    const receipt = await env.publicClient.getTransactionReceipt({ hash: rows[0]!.hash as Hex })
    const limit = parseTransaction(rows[0]!.raw as Hex).gas!
    const estimate = ((limit - 25_000n) * 10n) / 11n
    expect(receipt.gasUsed - estimate).toBeGreaterThanOrEqual(17_000n)
    expect((await env.balance(buyer.address)) - before).toBe(-usdc(20))
  }, 60_000)

  it("an RPC that under-estimates the relay's gas is caught by the simulation at the limit about to be signed: nothing reverts, the next attempt estimates again, one relay pays", async () => {
    await withProxy(async (proxy) => {
      const before = await env.balance(buyer.address)
      // The relay's gas is its simulation's estimate (one eth_estimateGas).
      proxy.inject('eth_estimateGas', { kind: 'rewrite', fn: lowGas }, { times: 1 })
      await startRunner({ rpcUrl: proxy.url })
      const { paymentId } = await confirmGasless(env, buyer)
      const rows = await paidOnce(paymentId, before)
      expect(rows.map((r) => r.status)).toEqual(['succeeded'])
      expect(parseTransaction(rows[0]!.raw as Hex).gas).toBeGreaterThan(0x5208n + 0x5208n / 10n + 25_000n)
      expect((await jobOf(paymentId, 'evm.relay')).last_error).toMatch(/would run out of gas at the limit/)
    })
  }, 60_000)
})

describe('EVM relay under a misbehaving RPC', () => {
  it('a relay send whose answer is lost after the node took it is found on chain by its hash, never signed again: the payment succeeds with one relay transaction', async () => {
    await withProxy(async (proxy) => {
      const before = await env.balance(buyer.address)
      // The client's own retries lose their answers too.
      proxy.inject('eth_sendRawTransaction', { kind: 'lostAnswer' }, { times: 3 })
      await startRunner({ rpcUrl: proxy.url })
      const { paymentId } = await confirmGasless(env, buyer)
      expect((await paidOnce(paymentId, before)).map((r) => r.status)).toEqual(['succeeded'])
      const job = await jobOf(paymentId, 'evm.relay')
      expect(job.attempts).toBeGreaterThanOrEqual(2)
      expect(job.last_error).not.toBeNull()
    })
  }, 60_000)

  it('receipts withheld past receiptTimeoutMs and feeBumpAfterMs hand the job back with the payment processing and its one hash recorded; the mined relay is never replaced or sent again, and the payment succeeds once receipts are served', async () => {
    await withProxy(async (proxy) => {
      const before = await env.balance(buyer.address)
      proxy.inject('eth_getTransactionReceipt', { kind: 'withhold' })
      await startRunner({ rpcUrl: proxy.url, feeBumpAfterMs: 300 }, { receiptTimeoutMs: 500 })
      const { paymentId } = await confirmGasless(env, buyer)
      await relayRetried(paymentId, 2)
      const [row] = await relayRows(env, paymentId)
      // Mined on the node all along; the proxy hides only its receipt.
      const receipt = await env.publicClient.getTransactionReceipt({ hash: row!.hash as Hex })
      expect(receipt.status).toBe('success')
      expect((await paymentRow(paymentId)).status).toBe('processing')
      expect((await relayRows(env, paymentId)).map((r) => r.status)).toEqual(['sent'])
      expect(proxy.calls('eth_sendRawTransaction')).toBe(1)

      proxy.clear()
      await relayDueNow(paymentId)
      expect((await paidOnce(paymentId, before)).map((r) => r.hash)).toEqual([row!.hash])
    })
  }, 60_000)

  it('receipt reads answered 429, malformed JSON or never (timed out) keep the sent relay processing past the job’s attempt limit, never given up; once reads recover the payment succeeds with one transfer', async () => {
    await withProxy(async (proxy) => {
      const before = await env.balance(buyer.address)
      const { paymentId } = await confirmGasless(env, buyer)
      // Its first run is the handler's last allowed attempt (8): a counted failure would give up and fail
      // the payment, although the relay it just sent lands.
      await relayDueNow(paymentId, 7)
      proxy.inject('eth_getTransactionReceipt', { kind: 'rateLimited' })
      await startRunner({ rpcUrl: proxy.url })
      await relayRetried(paymentId, 8)
      expect((await relayRows(env, paymentId)).map((r) => r.status)).toEqual(['sent'])
      expect((await paymentRow(paymentId)).status).toBe('processing')

      proxy.inject('eth_getTransactionReceipt', { kind: 'malformed' })
      await relayDueNow(paymentId)
      await relayRetried(paymentId, 9)
      expect((await paymentRow(paymentId)).status).toBe('processing')

      proxy.inject('eth_getTransactionReceipt', { kind: 'hang' })
      await relayDueNow(paymentId)
      // Each hung read is cut (what a client timeout does), retries included.
      await relayRetried(paymentId, 10, () => proxy.cutHeld())
      expect((await paymentRow(paymentId)).status).toBe('processing')

      proxy.clear()
      await relayDueNow(paymentId)
      expect((await paidOnce(paymentId, before)).map((r) => r.status)).toEqual(['succeeded'])
    })
  }, 60_000)
})

/**
 * A relay mined but not yet `confirmations` deep, removed by a reorg: `rewrite` writes the new history
 * (depth = blocks to replace). Returns the payment once final, with its relay rows.
 */
async function relayReorgedAway(payer: Buyer, rewrite: (depth: number, typed: Typed) => Promise<void>) {
  const collected = await env.balance(env.collection)
  const { paymentId, typed } = await confirmGasless(env, payer)
  await startRunner({ confirmations: 3 }, { receiptTimeoutMs: 1_000 })
  try {
    const [relay, mined] = await relayMined(paymentId)
    expect(await env.balance(env.collection)).toBe(collected + usdc(10))
    await rewrite(Number((await control.blockNumber()) - mined.blockNumber + 1n), typed)
    await expect(env.publicClient.getTransactionReceipt({ hash: relay.hash as Hex })).rejects.toThrow()
    expect(await env.balance(env.collection)).toBe(collected)
    // Blocks keep coming until the payment is final.
    await until(
      async () => {
        if ((await paymentRow(paymentId)).status !== 'processing') return true
        await control.mine(1)
        await new Promise((resolve) => setTimeout(resolve, 150))
        return undefined
      },
      'the payment after the reorg',
      40_000,
    )
    return { paymentId, relay, collected, rows: await relayRows(env, paymentId) }
  } finally {
    await runner?.stop()
    runner = undefined
  }
}

type Typed = Awaited<ReturnType<typeof confirmGasless>>['typed']

async function expectFailedWithNothingMoved(outcome: Awaited<ReturnType<typeof relayReorgedAway>>) {
  const { paymentId, relay, collected, rows } = outcome
  const payment = await paymentRow(paymentId)
  expect(payment.status).toBe('failed')
  expect(payment.failure_code).toBe('relay_reverted')
  expect(payment.settlement_status).toBeNull()
  // The same signed relay went out again (never a second one signed) and reverted on the new history.
  expect(rows.map((r) => [r.hash, r.status])).toEqual([[relay.hash, 'reverted']])
  expect(await env.balance(env.collection)).toBe(collected)
  const settle = await env.t.db
    .selectFrom('jobs')
    .select('id')
    .where('payment_id', '=', paymentId)
    .where('kind', '=', 'evm.settle')
    .execute()
  expect(settle).toHaveLength(0)
  expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('failed')
}

describe('EVM reorgs that leave the relay nothing to land on', () => {
  it('with confirmations 3, a reorg that removes the counted relay and puts the payer’s spending of the funds first ends the payment failed, with no settlement and no tokens collected', async () => {
    const payer = await env.buyer(4)
    const funds = await env.balance(payer.address)
    const sink = privateKeyToAccount(generatePrivateKey()).address
    const wallet = createWalletClient({
      account: privateKeyToAccount(payer.key),
      chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
      transport: http(env.anvil.rpcUrl),
    })
    const outcome = await relayReorgedAway(payer, async (depth) => {
      // The payer's own transfer of everything, signed now and mined in the first block of the new history.
      const spend = await wallet.signTransaction({
        to: env.token,
        data: encodeFunctionData({ abi: testUsdcAbi, functionName: 'transfer', args: [sink, funds] }),
        nonce: await env.publicClient.getTransactionCount({ address: payer.address }),
        gas: 100_000n,
        maxFeePerGas: parseGwei('100'),
        maxPriorityFeePerGas: parseGwei('1'),
      })
      await control.reorg(depth, [[spend, 0]])
      expect(await env.balance(payer.address)).toBe(0n)
    })
    await expectFailedWithNothingMoved(outcome)
    expect(await env.balance(sink)).toBe(funds)
  }, 60_000)

  it('with confirmations 3, a reorg that removes the counted relay until its authorization expired ends the payment failed, with no settlement and the payer not charged', async () => {
    const payer = await env.buyer(5)
    const funds = await env.balance(payer.address)
    const outcome = await relayReorgedAway(payer, async (depth, typed) => {
      // Mining stops with the reorg; the next block comes after validBefore (a long stall).
      await control.setAutomine(false)
      try {
        await control.reorg(depth)
        await rpcCall('evm_setNextBlockTimestamp', [Number(typed.message.validBefore) + 1])
        await control.mine(1)
      } finally {
        await control.setAutomine(true)
      }
    })
    await expectFailedWithNothingMoved(outcome)
    expect(await env.balance(payer.address)).toBe(funds)
  }, 60_000)
})

function rpcCall(method: string, params: unknown[]) {
  return env.publicClient.request({ method, params } as never)
}
