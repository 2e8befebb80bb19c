import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Address, createWalletClient, getAddress, type Hash, http, parseEther } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import type { EvmChain } from '../../src/server/chains/evm/chain.js'
import { reconcileEvmChain } from '../../src/server/chains/evm/ledger.js'
import { scanEvmPushPayments } from '../../src/server/chains/evm/push.js'
import { listDifferences } from '../../src/server/ledger/reconcile.js'
import { anvilChain, anvilPrivateKeys, deployTestToken, mintTestToken } from '../anvil.js'
import { depositsOf, expectEachSentBackOnce } from '../deposits.js'
import { createMerchant, headers } from '../server/helpers.js'
import { createEvmEnv, type EvmEnv, usdc } from './support.js'

/**
 * Stray money at an EVM deposit address (docs/push-payments.md, "Stray money"), with the real CLI run as
 * an operator runs it against a live server's database and config: a token caipay does not configure,
 * native ETH sent before the forwarder exists, and a configured token the payment's scan does not watch
 * (what a configured token on another chain is) are listed by `caipay deposits stray` and moved once by
 * `caipay deposits recover` through the recorded executor job, the balances read from the chain.
 */

// biome-ignore lint/suspicious/noExplicitAny: JSON output, checked by assertions
type Json = any

let env: EvmEnv
let chain: EvmChain
/** Configured on the chain with `push: false`: no scan watches it for any payment. */
let unwatched: Address
let dir: string
let configFile: string

beforeAll(async () => {
  env = await createEvmEnv({
    extraAssets: async (anvil) => {
      unwatched = await deployTestToken(anvil.rpcUrl)
      return {
        [`${anvil.caip2}/erc20:${unwatched}`]: {
          symbol: 'EURC',
          name: 'Euro Coin',
          decimals: 6,
          usdRate: '1',
          methods: ['transfer'],
          push: false,
        },
      }
    },
  })
  chain = env.t.app.liveChains.evm[0]!
  env.startRunner()
  // The servers' config as an operator's file: the chain, its executor key and its assets.
  dir = mkdtempSync(join(tmpdir(), 'caipay-stray-'))
  configFile = join(dir, 'config.json')
  const asset = (symbol: string) => ({
    symbol,
    name: symbol,
    decimals: 6,
    usdRate: '1',
    methods: ['transfer'],
  })
  writeFileSync(
    configFile,
    JSON.stringify({
      chains: {
        [env.anvil.caip2]: {
          rpcUrl: env.anvil.rpcUrl,
          signerKey: anvilPrivateKeys[1],
          assets: {
            [env.asset]: asset('USDC'),
            [`${env.anvil.caip2}/erc20:${unwatched}`]: { ...asset('EURC'), push: false },
          },
        },
      },
    }),
  )
})
afterAll(async () => {
  await env?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const bin = fileURLToPath(new URL('../../bin/caipay.js', import.meta.url))

function caipay(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args, '--database-url', env.t.databaseUrl], {
      env: { ...process.env, DATABASE_URL: '' },
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

/** `caipay deposits stray PAYMENT_ID` against the operator's config file, then `more`. */
function strayArgs(paymentId: string, ...more: string[]) {
  return ['deposits', 'stray', paymentId, '--config', configFile, ...more]
}

/** `caipay deposits recover PAYMENT_ID --asset ASSET` against the operator's config, on Anvil's chain unless told. */
function recoverArgs(paymentId: string, o: { asset: string; to?: string; chain?: string; json?: boolean }) {
  const chain = o.chain ?? env.anvil.caip2
  const args = [
    'deposits',
    'recover',
    paymentId,
    '--config',
    configFile,
    '--chain',
    chain,
    '--asset',
    o.asset,
  ]
  if (o.to) args.push('--to', o.to)
  if (o.json) args.push('--json')
  return args
}

/** What `caipay deposits stray PAYMENT_ID --json` lists. */
async function strayListing(paymentId: string, ...more: string[]): Promise<Json> {
  const run = await caipay(strayArgs(paymentId, '--json', ...more))
  expect(run.code, run.stderr).toBe(0)
  return JSON.parse(run.stdout)
}

function wallet(index: number) {
  const account = privateKeyToAccount(anvilPrivateKeys[index]!)
  return createWalletClient({
    account,
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
  })
}

async function mined(hash: Hash) {
  const receipt = await env.publicClient.waitForTransactionReceipt({ hash })
  expect(receipt.status).toBe('success')
  return receipt
}

async function sendToken(index: number, token: Address, to: Address, amount: bigint): Promise<Address> {
  const from = wallet(index)
  await mintTestToken(env.anvil.rpcUrl, token, from.account.address, amount)
  await mined(
    await from.writeContract({
      address: token,
      abi: testUsdcAbi,
      functionName: 'transfer',
      args: [to, amount],
    }),
  )
  return from.account.address
}

async function depositAddress(paymentId: string): Promise<Address> {
  const res = await env.gw('POST', paymentId, '/options', { accounts: [] })
  expect(res.statusCode, res.body).toBe(200)
  const push = res.json.options.filter((o: Json) => o.source === 'push')
  expect(push).toHaveLength(1)
  return getAddress(push[0].push.recipient)
}

async function recoveries(paymentId: string) {
  return env.t.db
    .selectFrom('evm_stray_recoveries')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .orderBy('created_at')
    .execute()
}

async function reconciled(): Promise<void> {
  await reconcileEvmChain(env.t.db, chain)
  expect(await listDifferences(env.t.db, { open: true })).toEqual([])
}

async function allMoved(paymentId: string, count: number) {
  const deadline = Date.now() + 30_000
  for (;;) {
    const rows = await recoveries(paymentId)
    if (rows.length === count && rows.every((r) => r.status !== 'queued')) return rows
    if (Date.now() > deadline) throw new Error(`recoveries not done: ${JSON.stringify(rows)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('caipay deposits stray / recover', () => {
  it('lists an unconfigured token and native ETH at a deposit address and moves each once to the address given', {
    timeout: 120_000,
  }, async () => {
    const { paymentId } = await env.pay('1250')
    const deposit = await depositAddress(paymentId)
    const other = await deployTestToken(env.anvil.rpcUrl)
    const tokenSender = await sendToken(6, other, deposit, 3_000_000n)
    // Native ETH before the forwarder exists: nothing refuses it.
    const ethSender = wallet(8)
    await mined(await ethSender.sendTransaction({ to: deposit, value: parseEther('0.25') }))
    expect(await env.publicClient.getCode({ address: deposit })).toBeUndefined()

    const { holdings, recoveries: none } = await strayListing(paymentId, '--token', other)
    expect(none).toEqual([])
    const holding = (asset: string) =>
      holdings.find((h: Json) => h.asset.toLowerCase() === asset.toLowerCase())
    const caip2 = env.anvil.caip2
    expect(holding(`${caip2}/slip44:60`)).toMatchObject({
      depositAddress: deposit,
      balance: parseEther('0.25').toString(),
      handledBy: 'move',
      senders: [],
    })
    expect(holding(`${caip2}/erc20:${other}`)).toMatchObject({
      balance: '3000000',
      handledBy: 'move',
      senders: [{ address: tokenSender, amount: '3000000' }],
    })
    expect(holding(env.asset)).toMatchObject({ balance: '0', handledBy: 'scan' })
    expect(holding(`${caip2}/erc20:${unwatched}`)).toMatchObject({ balance: '0', handledBy: 'deposit' })
    const table = await caipay(strayArgs(paymentId))
    expect(table.code, table.stderr).toBe(0)
    expect(table.stdout.split('\n')[0]).toMatch(
      /^CHAIN\s+ADDRESS\s+ASSET\s+BALANCE\s+HANDLED BY\s+BLOCK\s+SENDERS/,
    )

    // Moved: the token back to its sender, the ETH to an operator.
    const operator = privateKeyToAccount(generatePrivateKey()).address
    const before = await env.balance(tokenSender, other)
    const recover = (asset: string, to: Address) => caipay(recoverArgs(paymentId, { asset, to }))
    const first = await recover(other, tokenSender)
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toMatch(/^Recovery rcv_\w+: .* is being moved to /)
    const native = await recover('native', operator)
    expect(native.code, native.stderr).toBe(0)
    const rows = await allMoved(paymentId, 2)
    expect(rows.map((r) => [r.asset, r.to_address, r.status, String(r.amount)])).toEqual([
      [`${caip2}/erc20:${other}`, tokenSender.toLowerCase(), 'moved', '3000000'],
      [`${caip2}/slip44:60`, operator.toLowerCase(), 'moved', parseEther('0.25').toString()],
    ])
    // Read from the chain: each went where it was sent, and the deposit address holds nothing.
    expect(await env.balance(tokenSender, other)).toBe(before + 3_000_000n)
    expect(await env.publicClient.getBalance({ address: operator })).toBe(parseEther('0.25'))
    expect(await env.balance(deposit, other)).toBe(0n)
    expect(await env.publicClient.getBalance({ address: deposit })).toBe(0n)
    // Each by its own executor transaction, recorded with its step before it was sent.
    const sent = await env.t.db
      .selectFrom('evm_transactions')
      .select(['hash', 'step', 'status'])
      .where('payment_id', '=', paymentId)
      .where('purpose', '=', 'recover')
      .orderBy('id')
      .execute()
    expect(sent.map((t) => [t.step, t.status])).toEqual(rows.map((r) => [r.id, 'succeeded']))
    expect(sent.map((t) => t.hash)).toEqual(rows.map((r) => r.tx_hash))
    const gas = await Promise.all(
      sent.map(async (t) => (await env.publicClient.getTransactionReceipt({ hash: t.hash as Hash })).gasUsed),
    )
    console.info(`EVM stray recovery gas: token (the forwarder created with it) ${gas[0]}, native ${gas[1]}`)

    // Once: nothing is left, so a second run moves nothing and says so.
    const again = await recover(other, tokenSender)
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(
      /^caipay: 0x[0-9a-fA-F]{40} holds no .* at block \d+; nothing to recover\.\n$/,
    )
    const nativeAgain = await recover('native', operator)
    expect(nativeAgain.code).toBe(1)
    expect(await recoveries(paymentId)).toHaveLength(2)
    expect(await env.balance(tokenSender, other)).toBe(before + 3_000_000n)
    const listedAfter = await strayListing(paymentId)
    expect(listedAfter.recoveries.map((r: Json) => [r.id, r.status])).toEqual(
      [...rows].reverse().map((r) => [r.id, 'moved']),
    )

    // The forwarder exists now: native ETH sent to it is refused, the sender keeps it.
    await expect(ethSender.sendTransaction({ to: deposit, value: parseEther('0.1') })).rejects.toThrow()
    // None of it touched the collection address: the ledger still agrees with the chain.
    await reconciled()
  })

  it('a configured token the payment did not offer there is booked as its deposit and sent back to its sender', {
    timeout: 120_000,
  }, async () => {
    const { paymentId } = await env.pay('1250')
    const deposit = await depositAddress(paymentId)
    const cancelled = await env.t.request({
      method: 'POST',
      url: `/v1/payments/${paymentId}/cancel`,
      headers: headers(env.liveKey, env.merchant.id),
    })
    expect(cancelled.statusCode, cancelled.body).toBe(200)
    // EURC is configured on the chain but offers no push option (what a configured token on a chain the
    // payment was not offered on is): no scan reads its transfers into this address.
    const sender = await sendToken(7, unwatched, deposit, usdc(4))
    const start = await env.balance(sender, unwatched)
    const collected = await env.balance(env.collection, unwatched)
    const listed = await strayListing(paymentId)
    expect(
      listed.holdings.find((h: Json) => h.asset === `${env.anvil.caip2}/erc20:${unwatched}`),
    ).toMatchObject({
      balance: usdc(4).toString(),
      handledBy: 'deposit',
      senders: [{ address: sender, amount: usdc(4).toString() }],
    })
    const withTo = await caipay(recoverArgs(paymentId, { asset: unwatched, to: sender }))
    expect(withTo.code).toBe(1)
    expect(withTo.stderr).toMatch(/is configured on .*omit --to/)
    const adopted = await caipay(recoverArgs(paymentId, { asset: unwatched, json: true }))
    expect(adopted.code, adopted.stderr).toBe(0)
    expect(JSON.parse(adopted.stdout)).toEqual({
      kind: 'deposit',
      asset: `${env.anvil.caip2}/erc20:${unwatched}`,
      depositAddress: deposit,
      transfers: 1,
    })
    // The push sweep brings it to the collection address; the payment is cancelled, so it is a late
    // deposit, sent back to its sender at once through the ledger.
    await env.waitJob(paymentId, 'evm.push_sweep')
    await env.waitJob(paymentId, 'evm.deposit_refund')
    const [held, ...more] = await depositsOf(env.t.db, paymentId)
    expect(more).toEqual([])
    expect(held).toMatchObject({
      reason: 'late',
      status: 'refunded',
      amount: usdc(4).toString(),
      sender: `${env.anvil.caip2}:${sender}`,
    })
    await expectEachSentBackOnce(env.t.db, paymentId, 1)
    expect(await env.balance(sender, unwatched)).toBe(start + usdc(4))
    expect(await env.balance(deposit, unwatched)).toBe(0n)
    expect(await env.balance(env.collection, unwatched)).toBe(collected)
    // Once: its transfer is recorded, so a second run books nothing.
    const again = await caipay(recoverArgs(paymentId, { asset: unwatched }))
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/not recorded already; nothing to recover/)
    expect(await depositsOf(env.t.db, paymentId)).toHaveLength(1)
    await reconciled()
  })

  it('the offered token after the late watch window (24 h past expiry) is adopted the same way', {
    timeout: 120_000,
  }, async () => {
    const { paymentId } = await env.pay('1250')
    const deposit = await depositAddress(paymentId)
    const watched = await caipay(recoverArgs(paymentId, { asset: env.token }))
    expect(watched.code).toBe(1)
    expect(watched.stderr).toMatch(/swept into the collection address by the push scan/)
    // Expired two days ago: no scan reads this address any more.
    await env.t.db
      .updateTable('payments')
      .set({ status: 'expired', expires_at: new Date(Date.now() - 2 * 86_400_000) })
      .where('id', '=', paymentId)
      .execute()
    const sender = await sendToken(9, env.token, deposit, usdc(2))
    const start = await env.balance(sender)
    expect(await scanEvmPushPayments(env.t.db, chain, env.t.app.config)).toBe(0)
    const listed = await strayListing(paymentId)
    expect(listed.holdings.find((h: Json) => h.asset === env.asset)).toMatchObject({
      balance: usdc(2).toString(),
      handledBy: 'deposit',
    })
    const adopted = await caipay(recoverArgs(paymentId, { asset: env.token }))
    expect(adopted.code, adopted.stderr).toBe(0)
    expect(adopted.stdout).toMatch(/^1 transfer\(s\) of .* recorded for payment/)
    await env.waitJob(paymentId, 'evm.push_sweep')
    await env.waitJob(paymentId, 'evm.deposit_refund')
    expect(
      await env.t.db
        .selectFrom('deposits')
        .select(['reason', 'status', 'amount'])
        .where('payment_id', '=', paymentId)
        .execute(),
    ).toEqual([{ reason: 'late', status: 'refunded', amount: usdc(2).toString() }])
    expect(await env.balance(sender)).toBe(start + usdc(2))
    expect(await env.balance(deposit)).toBe(0n)
    await reconciled()
  })

  it('refuses hostile input with one clear line and a non-zero exit', { timeout: 60_000 }, async () => {
    const { paymentId } = await env.pay('1250')
    await depositAddress(paymentId)
    const someone = privateKeyToAccount(generatePrivateKey()).address
    const unknown = 'pay_unknown000000000000000000'
    const cases: [string[], number, RegExp][] = [
      [recoverArgs(paymentId, { asset: 'native', to: '0x123' }), 2, /--to must be an EVM address/],
      [recoverArgs(paymentId, { asset: 'ETH', to: someone }), 2, /--asset \(or native\) must be/],
      [recoverArgs(paymentId, { asset: 'native', to: someone, chain: 'solana:x' }), 2, /--chain must be/],
      [
        ['deposits', 'recover', paymentId, '--chain', env.anvil.caip2, '--asset', 'native', '--to', someone],
        2,
        /--config is required/,
      ],
      [strayArgs('not-a-payment'), 2, /Give exactly one payment id/],
      [strayArgs(paymentId, '--token', 'nope'), 2, /--token must be an EVM address/],
      [strayArgs(unknown), 1, /No payment pay_unknown/],
      [recoverArgs(unknown, { asset: 'native', to: someone }), 1, /No payment/],
      [
        recoverArgs(paymentId, { asset: 'native', to: someone, chain: 'eip155:1' }),
        1,
        /no deposit address on eip155:1/,
      ],
      // The token the scan watches for the payment: its sweep moves it, a recovery may not.
      [
        recoverArgs(paymentId, { asset: env.asset.split(':').at(-1)!, to: someone }),
        1,
        /swept into the collection address by the push scan/,
      ],
      // Nothing there.
      [recoverArgs(paymentId, { asset: 'native', to: someone }), 1, /holds no .*nothing to recover/],
    ]
    const { apiKey: testKey } = await env.t.createKey('test')
    const testMerchant = await createMerchant(env.t, testKey)
    const created = await env.t.request({
      method: 'POST',
      url: '/v1/payments',
      headers: headers(testKey, testMerchant),
      payload: { referenceId: 'stray-test-mode', amount: { unit: 'iso4217/USD', value: '100' } },
    })
    expect(created.statusCode, created.body).toBe(201)
    cases.push([strayArgs(created.json.paymentId), 1, /test-mode payment/])
    for (const [args, code, message] of cases) {
      const run = await caipay(args)
      expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(code)
      const [line] = run.stderr.split('\n')
      expect(line, args.join(' ')).toMatch(/^caipay: /)
      expect(line).toMatch(message)
      if (code === 1) expect(run.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1)
    }
    expect(await recoveries(paymentId)).toEqual([])
  })
})
