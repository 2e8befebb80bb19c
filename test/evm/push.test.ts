import { build as buildEip681, parse as parseEip681 } from 'eth-url-parser'
import { createWalletClient, getAddress, type Hash, http } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import type { EvmChain } from '../../src/server/chains/evm/chain.js'
import { pushForwarderFactoryAbi } from '../../src/server/chains/evm/forwarder/artifact.js'
import { reconcileEvmChain } from '../../src/server/chains/evm/ledger.js'
import {
  create2Deployer,
  depositAddressOf,
  depositSalt,
  eip681TransferUrl,
  pushFactoryAddress,
  scanEvmPushPayments,
} from '../../src/server/chains/evm/push.js'
import type { JobRunner } from '../../src/server/jobs/runner.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { listDifferences } from '../../src/server/ledger/reconcile.js'
import { depositRefundJobKind } from '../../src/server/payments/deposits.js'
import { anvilChain, anvilPrivateKeys, mintTestToken } from '../anvil.js'
import { depositsOf, expectEachSentBackOnce } from '../deposits.js'
import { headers } from '../server/helpers.js'
import { createEvmEnv, type EvmEnv, usdc } from './support.js'

/**
 * EVM push payments on Anvil (docs/push-payments.md): the buyer is an exchange-style hot wallet that
 * knows only the EIP-681 link and sends a plain ERC-20 transfer to the payment's deposit address; the
 * scan finds it in the token's Transfer logs, the sweep job deploys the forwarder and empties it into
 * the collection address in one executor transaction, and the payment succeeds and settles, with every
 * mismatch ending where the docs say and the ledger agreeing with the chain.
 */

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies, checked by assertions
type Json = any

let env: EvmEnv
let chain: EvmChain
let runner: JobRunner
const due = usdc(12.5)

beforeAll(async () => {
  env = await createEvmEnv()
  chain = env.t.app.liveChains.evm[0]!
  runner = env.startRunner()
})
afterAll(() => env?.close())

/** An exchange's hot wallet: one address paying for many customers, with plain transfers only. */
async function hotWallet(index: number, tokens = usdc(1000)) {
  const account = privateKeyToAccount(anvilPrivateKeys[index]!)
  await mintTestToken(env.anvil.rpcUrl, env.token, account.address, tokens)
  const wallet = createWalletClient({
    account,
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
  })
  return {
    address: account.address,
    /** What a wallet does with an EIP-681 link: parse it (a published parser) and send the transfer. */
    async payLink(url: string, amount?: bigint): Promise<{ hash: Hash; gasUsed: bigint; block: bigint }> {
      const link = parseEip681(url)
      expect(link.function_name).toBe('transfer')
      expect(Number(link.chain_id)).toBe(env.anvil.chainId)
      const hash = await wallet.writeContract({
        address: getAddress(link.target_address),
        abi: testUsdcAbi,
        functionName: 'transfer',
        args: [getAddress(link.parameters!.address!), amount ?? exactInteger(link.parameters!.uint256!)],
      })
      const receipt = await env.publicClient.waitForTransactionReceipt({ hash })
      expect(receipt.status).toBe('success')
      return { hash, gasUsed: receipt.gasUsed, block: receipt.blockNumber }
    },
  }
}

/** eth-url-parser writes large numbers in exponent form (`1.5e+21`): the exact integer they denote. */
function exactInteger(text: string): bigint {
  const match = /^(\d+)(?:\.(\d+))?(?:e\+?(\d+))?$/.exec(text)
  if (!match) throw new Error(`not a number: ${text}`)
  const [, whole, fraction = '', exponent = '0'] = match
  const shift = Number(exponent) - fraction.length
  expect(shift).toBeGreaterThanOrEqual(0)
  return BigInt(whole! + fraction) * 10n ** BigInt(shift)
}

async function pushOption(paymentId: string): Promise<Json> {
  const res = await env.gw('POST', paymentId, '/options', { accounts: [] })
  expect(res.statusCode, res.body).toBe(200)
  const push = res.json.options.filter((o: Json) => o.source === 'push')
  expect(push).toHaveLength(1)
  return push[0]
}

/** The payment's sweep job has applied every transfer found for it. */
async function swept(paymentId: string): Promise<Json> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const left = await env.t.db
      .selectFrom('evm_push_transfers')
      .select('log_id')
      .where('payment_id', '=', paymentId)
      .where('state', '=', 'found')
      .execute()
    const job = await env.t.db
      .selectFrom('jobs')
      .selectAll()
      .where('payment_id', '=', paymentId)
      .where('kind', '=', 'evm.push_sweep')
      .executeTakeFirst()
    if (left.length === 0 && job?.state === 'succeeded') return job.result
    if (Date.now() > deadline) throw new Error(`sweep of ${paymentId} not done: ${JSON.stringify(job)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

async function row(paymentId: string) {
  return env.t.db.selectFrom('payments').selectAll().where('id', '=', paymentId).executeTakeFirstOrThrow()
}

async function sweepGas(paymentId: string): Promise<bigint[]> {
  const rows = await env.t.db
    .selectFrom('evm_transactions')
    .select('hash')
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', 'sweep')
    .where('status', '=', 'succeeded')
    .orderBy('id')
    .execute()
  return Promise.all(
    rows.map(async (r) => (await env.publicClient.getTransactionReceipt({ hash: r.hash as Hash })).gasUsed),
  )
}

async function reconciled(): Promise<void> {
  await reconcileEvmChain(env.t.db, chain)
  expect(await listDifferences(env.t.db, { open: true })).toEqual([])
}

const scan = (config = env.t.app.config) => scanEvmPushPayments(env.t.db, chain, config)

/** The payment's time runs out (the chain and the scan read the real clock; the refund job runs now). */
async function expire(paymentId: string): Promise<void> {
  await env.t.db
    .updateTable('payments')
    .set({ expires_at: new Date(Date.now() - 1000) })
    .where('id', '=', paymentId)
    .execute()
}

describe('EIP-681 links', () => {
  it('agree with eth-url-parser, both ways, over generated cases', () => {
    const amounts = [1n, 9n, 12_500_000n, 10n ** 18n, 10n ** 21n + 7n, 2n ** 256n - 1n]
    for (let i = 0; i < 40; i++) {
      const token = privateKeyToAccount(generatePrivateKey()).address
      const to = privateKeyToAccount(generatePrivateKey()).address
      const chainId = [1, 10, 137, 8453, 31337, 11155111][i % 6]!
      const amount = amounts[i % amounts.length]! + BigInt(i)
      const url = eip681TransferUrl({ token, chainId, to, amount })
      const parsed = parseEip681(url)
      expect(parsed).toMatchObject({
        scheme: 'ethereum',
        target_address: token,
        chain_id: String(chainId),
        function_name: 'transfer',
      })
      expect(getAddress(parsed.parameters!.address!)).toBe(to)
      expect(exactInteger(parsed.parameters!.uint256!)).toBe(amount)
      // The parser's own link of the same transfer means the same to it.
      const rebuilt = buildEip681({
        target_address: token,
        chain_id: `${chainId}`,
        function_name: 'transfer',
        parameters: { address: to, uint256: amount.toString() },
      })
      expect(parseEip681(rebuilt)).toEqual(parsed)
    }
  })
})

describe('EVM push payments on Anvil', () => {
  it('offers a deposit address unique to the payment, stable across options calls', async () => {
    const a = await env.pay('1250')
    const b = await env.pay('1250')
    const first = await pushOption(a.paymentId)
    const again = await pushOption(a.paymentId)
    const other = await pushOption(b.paymentId)
    expect(again.push).toEqual(first.push)
    expect(other.push.recipient).not.toBe(first.push.recipient)
    const factory = pushFactoryAddress(env.collection)
    expect(first.push.recipient).toBe(depositAddressOf(factory, a.paymentId))
    expect(first).toMatchObject({
      source: 'push',
      actions: [],
      account: `${env.anvil.caip2}:${first.push.recipient}`,
      push: { asset: env.asset, amount: due.toString(), reference: first.push.recipient },
    })
    expect(first.push.url).toBe(
      `ethereum:${env.token}@${env.anvil.chainId}/transfer?address=${first.push.recipient}&uint256=${due}`,
    )
    // The deployer the factory's address follows from is on the chain.
    expect(await env.publicClient.getCode({ address: create2Deployer })).not.toBe('0x')
  })

  it('a hot wallet pays two payments with plain transfers: each deposit address finds its payment, which settles', async () => {
    const exchange = await hotWallet(5)
    const a = await env.pay('1250')
    const b = await env.pay('1250')
    const linkA = (await pushOption(a.paymentId)).push
    const linkB = (await pushOption(b.paymentId)).push
    const start = await env.balance(exchange.address)
    const collected = await env.balance(env.collection)
    const settled = await env.balance(env.merchant.destination)
    const paidA = await exchange.payLink(linkA.url)
    const paidB = await exchange.payLink(linkB.url)
    expect(await scan()).toBe(2)
    await swept(a.paymentId)
    await swept(b.paymentId)
    for (const [paymentId, paid] of [
      [a.paymentId, paidA],
      [b.paymentId, paidB],
    ] as const) {
      const payment = await row(paymentId)
      expect(payment).toMatchObject({ status: 'succeeded', source: 'push', tx_id: `${paid.hash}:0` })
      expect(payment.buyer).toBe(`${env.anvil.caip2}:${exchange.address}`)
      const shown = await env.merchantView(paymentId)
      expect(shown).toMatchObject({ status: 'succeeded', source: 'push' })
      expect(shown.received).toEqual([{ asset: env.asset.toLowerCase(), value: due.toString() }])
      await env.waitSettled(paymentId)
    }
    // Balances on the chain: the hot wallet paid exactly twice, the deposit addresses are empty, the
    // merchant's destination got both, the collection address holds what it held.
    expect(await env.balance(exchange.address)).toBe(start - 2n * due)
    expect(await env.balance(getAddress(linkA.recipient))).toBe(0n)
    expect(await env.balance(getAddress(linkB.recipient))).toBe(0n)
    expect(await env.balance(env.merchant.destination)).toBe(settled + 2n * due)
    expect(await env.balance(env.collection)).toBe(collected)
    const entries = await env.t.db
      .selectFrom('ledger_entries')
      .select(['flow', 'amount'])
      .where('payment_id', '=', a.paymentId)
      .execute()
    expect(entries).toContainEqual({ flow: 'payment.collected', amount: due.toString() })
    await reconciled()

    // Gas: what the buyer pays (its transfer) and what the executor pays (deploy + sweep, settlement).
    const [sweepA] = await sweepGas(a.paymentId)
    const [sweepB] = await sweepGas(b.paymentId)
    const factoryDeploy = await env.t.db
      .selectFrom('evm_transactions')
      .select('hash')
      .where('purpose', '=', 'deploy')
      .where('step', '=', 'push_factory')
      .executeTakeFirstOrThrow()
    const deployGas = (await env.publicClient.getTransactionReceipt({ hash: factoryDeploy.hash as Hash }))
      .gasUsed
    // The deposit addresses the links named are the ones the factory on the chain deploys and sweeps.
    const onChain = await env.publicClient.readContract({
      address: pushFactoryAddress(env.collection),
      abi: pushForwarderFactoryAbi,
      functionName: 'depositAddress',
      args: [depositSalt(a.paymentId)],
    })
    expect(onChain).toBe(getAddress(linkA.recipient))
    expect(await env.publicClient.getCode({ address: onChain })).toMatch(/^0x363d3d373d3d3d363d73/)
    const sweepBlock = (
      await env.publicClient.getTransactionReceipt({
        hash: (
          await env.t.db
            .selectFrom('evm_transactions')
            .select('hash')
            .where('payment_id', '=', a.paymentId)
            .where('purpose', '=', 'sweep')
            .executeTakeFirstOrThrow()
        ).hash as Hash,
      })
    ).blockNumber
    console.info(
      `EVM push payment gas: buyer transfer ${paidA.gasUsed} / ${paidB.gasUsed}, ` +
        `executor deploy+sweep ${sweepA} / ${sweepB}, factory deploy (once per chain) ${deployGas}; ` +
        `transfer at block ${paidA.block}, swept and succeeded at block ${sweepBlock}`,
    )
    expect(sweepA).toBeGreaterThan(0n)
    expect(sweepA).toBeLessThan(250_000n)
  })

  it('underpaid: stays open showing what arrived, and completes when the rest arrives', async () => {
    const exchange = await hotWallet(6)
    const { paymentId } = await env.pay('1250', env.bareMerchantId)
    const link = (await pushOption(paymentId)).push
    await exchange.payLink(link.url, usdc(5))
    expect(await scan()).toBe(1)
    expect(await swept(paymentId)).toEqual({ applied: ['pending'] })
    const open = await env.merchantView(paymentId, env.bareMerchantId)
    expect(open.status).toBe('requires_action')
    expect(open.received).toEqual([{ asset: env.asset.toLowerCase(), value: usdc(5).toString() }])
    await reconciled()
    const rest = await exchange.payLink(link.url, usdc(7.5))
    expect(await scan()).toBe(1)
    expect(await swept(paymentId)).toEqual({ applied: ['succeeded'] })
    expect(await row(paymentId)).toMatchObject({ status: 'succeeded', tx_id: `${rest.hash}:0` })
    // Two rounds, each its own sweep; the forwarder deployed by the first.
    expect(await sweepGas(paymentId)).toHaveLength(2)
    expect(await env.balance(getAddress(link.recipient))).toBe(0n)
    // No settlement destination: the partner's float holds it, and the chain agrees.
    await reconciled()
  })

  it('underpaid at expiry, push.underpaid "hold" (the default): a held deposit the partner lists', async () => {
    expect(env.t.app.config.push.underpaid).toBe('hold')
    const exchange = await hotWallet(6)
    const { paymentId } = await env.pay('1250', env.bareMerchantId)
    const link = (await pushOption(paymentId)).push
    const start = await env.balance(exchange.address)
    await exchange.payLink(link.url, usdc(5))
    await scan()
    expect(await swept(paymentId)).toEqual({ applied: ['pending'] })
    await expire(paymentId)
    await scan()
    const [deposit, ...more] = await depositsOf(env.t.db, paymentId)
    expect(more).toEqual([])
    expect(deposit).toMatchObject({
      reason: 'underpaid',
      status: 'held',
      amount: usdc(5).toString(),
      sender: `${env.anvil.caip2}:${exchange.address}`,
    })
    const listed = await env.t.request({ method: 'GET', url: '/v1/deposits', headers: headers(env.liveKey) })
    expect(listed.statusCode, listed.body).toBe(200)
    expect(listed.json.deposits).toContainEqual(
      expect.objectContaining({ depositId: deposit!.id, reason: 'underpaid', status: 'held' }),
    )
    expect(await env.balance(exchange.address)).toBe(start - usdc(5))
    await reconciled()
  })

  it('underpaid at expiry, push.underpaid "refund": each sender gets its part back at once, through the ledger, exactly once', async () => {
    const refunding = {
      ...env.t.app.config,
      push: { ...env.t.app.config.push, underpaid: 'refund' as const },
    }
    const first = await hotWallet(6)
    const second = await hotWallet(7)
    const { paymentId } = await env.pay('1250', env.bareMerchantId)
    const link = (await pushOption(paymentId)).push
    const startFirst = await env.balance(first.address)
    const startSecond = await env.balance(second.address)
    await first.payLink(link.url, usdc(3))
    await second.payLink(link.url, usdc(4))
    // Each at its confirmations: one or two scans (and sweep rounds) find both.
    for (let pass = 0; pass < 2; pass++) {
      await scan(refunding)
      await swept(paymentId)
    }
    const open = await env.merchantView(paymentId, env.bareMerchantId)
    expect(open).toMatchObject({ status: 'requires_action', received: [{ value: usdc(7).toString() }] })
    // No worker: the scan's one transaction makes each deposit, books it and queues its refund, so a
    // worker dying after it leaves nothing held; a second scan makes nothing more.
    await runner.stop()
    await expire(paymentId)
    await scan(refunding)
    await scan(refunding)
    const made = await depositsOf(env.t.db, paymentId)
    expect(made.map((d) => [d.reason, d.status, d.sender, d.amount]).sort()).toEqual(
      [
        ['underpaid', 'refunding', `${env.anvil.caip2}:${first.address}`, usdc(3).toString()],
        ['underpaid', 'refunding', `${env.anvil.caip2}:${second.address}`, usdc(4).toString()],
      ].sort(),
    )
    const job = await env.t.db
      .selectFrom('jobs')
      .select('state')
      .where('payment_id', '=', paymentId)
      .where('kind', '=', 'evm.deposit_refund')
      .executeTakeFirstOrThrow()
    expect(job.state).toBe('pending')
    runner = env.startRunner()
    await env.waitJob(paymentId, 'evm.deposit_refund')
    expect((await depositsOf(env.t.db, paymentId)).map((d) => d.status)).toEqual(['refunded', 'refunded'])
    // Balances read from the chain: each sender has its part back.
    expect(await env.balance(first.address)).toBe(startFirst)
    expect(await env.balance(second.address)).toBe(startSecond)
    const sends = await env.t.db
      .selectFrom('evm_transactions')
      .select('step')
      .where('payment_id', '=', paymentId)
      .where('purpose', '=', 'deposit')
      .execute()
    expect(sends.map((s) => s.step).sort()).toEqual(made.map((d) => d.id).sort())
    await expectEachSentBackOnce(env.t.db, paymentId, 2)
    await reconciled()
  })

  it('overpaid: succeeds, and by default the whole amount settles to the merchant', async () => {
    const exchange = await hotWallet(7)
    const { paymentId } = await env.pay('1250')
    const link = (await pushOption(paymentId)).push
    const before = await env.balance(env.merchant.destination)
    await exchange.payLink(link.url, usdc(20))
    await scan()
    expect(await swept(paymentId)).toEqual({ applied: ['succeeded'] })
    await env.waitSettled(paymentId)
    expect(await env.balance(env.merchant.destination)).toBe(before + usdc(20))
    await reconciled()
  })

  it('late (after cancel) and paid twice: deposits, sent back to their sender at once through the ledger', async () => {
    const exchange = await hotWallet(8)
    const start = await env.balance(exchange.address)
    const { paymentId } = await env.pay('1250', env.bareMerchantId)
    const link = (await pushOption(paymentId)).push
    const cancelled = await env.t.request({
      method: 'POST',
      url: `/v1/payments/${paymentId}/cancel`,
      headers: headers(env.liveKey, env.bareMerchantId),
    })
    expect(cancelled.statusCode, cancelled.body).toBe(200)
    await exchange.payLink(link.url)
    await scan()
    expect(await swept(paymentId)).toEqual({ applied: ['deposit'] })
    const [deposit, ...more] = await depositsOf(env.t.db, paymentId)
    expect(more).toEqual([])
    expect(deposit).toMatchObject({
      reason: 'late',
      amount: due.toString(),
      sender: `${env.anvil.caip2}:${exchange.address}`,
      holder: holderOf(env.anvil.caip2, env.collection),
    })
    // Sent back from the collection address, exactly once, by the job `caipay deposits refund` queues too.
    expect(depositRefundJobKind(deposit!.chain_id)).toBe('evm.deposit_refund')
    await env.waitJob(paymentId, 'evm.deposit_refund')
    const refunded = await env.t.db
      .selectFrom('deposits')
      .selectAll()
      .where('id', '=', deposit!.id)
      .executeTakeFirstOrThrow()
    expect(refunded.status).toBe('refunded')
    expect(await env.balance(exchange.address)).toBe(start)
    await expectEachSentBackOnce(env.t.db, paymentId, 1)
    await reconciled()

    // Paid twice: the second transfer to a succeeded payment's deposit address is a deposit too.
    const paid = await env.pay('1250')
    const paidLink = (await pushOption(paid.paymentId)).push
    await exchange.payLink(paidLink.url)
    await scan()
    await swept(paid.paymentId)
    const beforeTwice = await env.balance(exchange.address)
    await exchange.payLink(paidLink.url)
    await scan()
    expect(await swept(paid.paymentId)).toEqual({ applied: ['deposit'] })
    await env.waitJob(paid.paymentId, 'evm.deposit_refund')
    const twice = await env.t.db
      .selectFrom('deposits')
      .select(['reason', 'amount', 'status'])
      .where('payment_id', '=', paid.paymentId)
      .execute()
    expect(twice).toEqual([{ reason: 'duplicate', amount: due.toString(), status: 'refunded' }])
    expect(await env.balance(exchange.address)).toBe(beforeTwice)
    await reconciled()
  })

  it('a kill between recording the sweep and sending it: the same bytes are sent once, applied once', async () => {
    await runner.stop()
    const exchange = await hotWallet(9)
    const { paymentId } = await env.pay('1250')
    const link = (await pushOption(paymentId)).push
    await exchange.payLink(link.url)
    expect(await scan()).toBe(1)
    const sweepOnly = { 'evm.push_sweep': env.t.app.jobHandlers['evm.push_sweep']! }
    // Automine off: the first runner records and broadcasts the sweep, then dies; the node then loses it
    // (dropped from its pool), which is what a kill right after the record leaves.
    await env.publicClient.request({ method: 'evm_setAutomine', params: [false] } as never)
    const first = env.startRunner(sweepOnly)
    const sweepRows = () =>
      env.t.db
        .selectFrom('evm_transactions')
        .select(['hash', 'status'])
        .where('payment_id', '=', paymentId)
        .where('purpose', '=', 'sweep')
        .execute()
    const deadline = Date.now() + 10_000
    while ((await sweepRows()).length === 0) {
      if (Date.now() > deadline) throw new Error('no sweep was recorded')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await first.stop()
    const [recorded] = await sweepRows()
    await env.publicClient.request({ method: 'anvil_dropTransaction', params: [recorded!.hash] } as never)
    await env.t.db
      .updateTable('jobs')
      .set({ state: 'running', locked_until: new Date(Date.now() - 1000) })
      .where('payment_id', '=', paymentId)
      .where('kind', '=', 'evm.push_sweep')
      .execute()
    await env.publicClient.request({ method: 'evm_setAutomine', params: [true] } as never)
    runner = env.startRunner()
    expect(await swept(paymentId)).toEqual({ applied: ['succeeded'] })
    expect(await sweepRows()).toEqual([{ hash: recorded!.hash, status: 'succeeded' }])
    expect(await row(paymentId)).toMatchObject({ status: 'succeeded', source: 'push' })
    expect(await env.balance(getAddress(link.recipient))).toBe(0n)
    await env.waitSettled(paymentId)
    await reconciled()
  })
})
