/**
 * The payer matrix, EIP-3009 rows: each row pays (or is refused) a live payment through the gateway on one
 * shared Anvil (--hardfork prague), with balances and code read from the chain. Smart accounts sign with
 * viem's own implementations where viem has one (toCoinbaseSmartAccount, which wraps an undeployed
 * account's signature in ERC-6492 by itself).
 */
import {
  type Address,
  createWalletClient,
  encodeFunctionData,
  type Hex,
  hashTypedData,
  http,
  type LocalAccount,
  maxUint256,
  parseGwei,
  serializeErc6492Signature,
} from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { permit2Address } from '../../protocol/evm/index.js'
import { createPayClient } from '../../src/pay/createPayClient.js'
import { anvilChain, mintTestToken } from '../anvil.js'
import {
  anvilRpc,
  coinbaseFactoryAddress,
  deployPayers,
  deployTetherAndPermit2,
  forViem,
  type Payers,
  signAsSafeOwner,
  type TypedJson,
  tetherAbi,
} from './payers.js'
import { createEvmEnv, type EvmEnv, injectFetch, isKind, usdc } from './support.js'

let env: EvmEnv
let payers: Payers
let tether: Address
let runner: ReturnType<EvmEnv['startRunner']>
/** Gas the executor paid per row (deployment + relay), for the matrix in docs/payers.md. */
const gas: Record<string, bigint> = {}

beforeAll(async () => {
  env = await createEvmEnv({
    anvilArgs: ['--hardfork', 'prague'],
    chainConfig: { eip6492Factories: [coinbaseFactoryAddress] },
    async extraAssets(anvil) {
      tether = (await deployTetherAndPermit2(anvil.rpcUrl)).tether
      const usdt = { symbol: 'USDT', name: 'Tether USD', decimals: 6, usdRate: '1', methods: ['eip3009'] }
      return { [`${anvil.caip2}/erc20:${tether}`]: { ...usdt, transferMethod: 'permit2' } }
    },
  })
  payers = await deployPayers(env)
  runner = env.startRunner()
}, 60_000)

afterAll(async () => {
  if (Object.keys(gas).length) console.info('executor gas per payment', gas)
  await env?.close()
})

const amount = usdc(10)

interface Attempt {
  paymentId: string
  signature: Hex
  status: number
  body: { code?: string; message?: string }
}

/** A $10 payment offered to `payer`, signed by `sign`, confirmed; the payer holds $25 of the token. */
async function attempt(
  payer: Address,
  sign: (typed: TypedJson) => Promise<Hex>,
  options: { mint?: boolean } = {},
): Promise<Attempt> {
  if (options.mint !== false) await mintTestToken(env.anvil.rpcUrl, env.token, payer, usdc(25))
  const { paymentId } = await env.pay('1000')
  const offered = await env.gw('POST', paymentId, '/options', { accounts: [`${env.anvil.caip2}:${payer}`] })
  expect(offered.statusCode, offered.body).toBe(200)
  const option = offered.json.options.find(isKind('eip3009'))
  expect(option, offered.body).toBeDefined()
  const typed = JSON.parse(JSON.parse(option.actions[0].walletRpc.params)[1]) as TypedJson
  const signature = await sign(typed)
  const res = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [signature] })
  return { paymentId, signature, status: res.statusCode, body: res.json }
}

async function executorGas(paymentId: string): Promise<bigint> {
  const rows = await env.t.db
    .selectFrom('evm_transactions')
    .select(['hash', 'purpose'])
    .where('payment_id', '=', paymentId)
    .where('purpose', 'in', ['deploy', 'relay'])
    .where('status', '=', 'succeeded')
    .execute()
  let total = 0n
  for (const row of rows) {
    total += (await env.publicClient.getTransactionReceipt({ hash: row.hash as Hex })).gasUsed
  }
  return total
}

/** The row pays: succeeded, exactly the amount left the payer, the executor paid the gas. */
async function expectPaid(row: string, payer: Address, run: Promise<Attempt>) {
  const { paymentId, status, body } = await run
  expect(status, JSON.stringify(body)).toBe(200)
  const final = await env.waitFinal(paymentId)
  expect(final.status).toBe('succeeded')
  expect(await env.balance(payer)).toBe(usdc(25) - amount)
  gas[row] = await executorGas(paymentId)
  expect(gas[row]).toBeGreaterThan(0n)
}

/**
 * The row is refused at confirm (4xx, named), and nothing moved: the payer's balance, the payment's state,
 * and no executor transaction was ever signed for it (no gas spent).
 */
async function expectRefused(payer: Address, run: () => Promise<Attempt>, reason: RegExp) {
  const { paymentId, status, body } = await run()
  expect(status, JSON.stringify(body)).toBe(400)
  expect(body.code).toBe('params_validation')
  expect(body.message).toMatch(reason)
  expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('requires_action')
  expect(await env.balance(payer)).toBe(usdc(25))
  const sent = await env.t.db
    .selectFrom('evm_transactions')
    .select('hash')
    .where('payment_id', '=', paymentId)
    .execute()
  expect(sent).toEqual([])
  const jobs = await env.t.db.selectFrom('jobs').select('kind').where('payment_id', '=', paymentId).execute()
  expect(jobs).toEqual([])
  return paymentId
}

describe('payer matrix (EIP-3009)', () => {
  it('EOA: ECDSA signature', async () => {
    const eoa = privateKeyToAccount(generatePrivateKey())
    await expectPaid(
      'eoa',
      eoa.address,
      attempt(eoa.address, (typed) => eoa.signTypedData(forViem(typed))),
    )
  })

  it('Safe 1.4.1 (CompatibilityFallbackHandler): ERC-1271 SafeMessage signature of its owner', async () => {
    const { owner, address } = await payers.safeAccount()
    await expectPaid(
      'safe',
      address,
      attempt(address, (typed) =>
        signAsSafeOwner(owner, address, env.anvil.chainId, hashTypedData(forViem(typed))),
      ),
    )
  })

  it('Coinbase-style smart wallet, deployed: ERC-1271 (replay-safe hash, SignatureWrapper)', async () => {
    const { account } = await payers.coinbase(true)
    const signature = await attempt(account.address, (typed) =>
      account.signTypedData(forViem(typed) as never),
    )
    expect(signature.signature.length).toBeGreaterThan(132)
    await expectPaid('coinbase', account.address, Promise.resolve(signature))

    // The same signature on a second payment of the same account: another authorization, refused.
    await expectRefused(
      account.address,
      async () => {
        await mintTestToken(env.anvil.rpcUrl, env.token, account.address, amount)
        return attempt(account.address, async () => signature.signature, { mint: false })
      },
      /not 0x[0-9a-fA-F]{40}'s signature .*answered 0xffffffff/,
    )
  })

  it('undeployed account through an allow-listed factory (ERC-6492): deployed, then paid once', async () => {
    const { account } = await payers.coinbase(false)
    expect(await env.publicClient.getCode({ address: account.address })).toBeUndefined()
    const signed = await attempt(account.address, (typed) => account.signTypedData(forViem(typed) as never))
    expect(signed.signature.endsWith('6492'.repeat(16))).toBe(true)
    await expectPaid('erc6492', account.address, Promise.resolve(signed))
    expect(await env.publicClient.getCode({ address: account.address })).not.toBeUndefined()
    const deployments = await env.t.db
      .selectFrom('evm_transactions')
      .select('status')
      .where('payment_id', '=', signed.paymentId)
      .where('purpose', '=', 'deploy')
      .execute()
    expect(deployments).toEqual([{ status: 'succeeded' }])
  })

  it('EIP-7702 account with a permissive delegate: the key signature, checked by the delegate', async () => {
    const eoa = await payers.delegated(payers.permissiveDelegate)
    const code = await env.publicClient.getCode({ address: eoa.address })
    expect(code?.startsWith('0xef0100')).toBe(true)
    await expectPaid(
      'eip7702-permissive',
      eoa.address,
      attempt(eoa.address, (typed) => eoa.signTypedData(forViem(typed))),
    )
  })

  it('EIP-7702 account with a strict (ERC-7579-style) delegate: refused at confirm, nothing moved', async () => {
    const eoa = await payers.delegated(payers.strictDelegate)
    await expectRefused(
      eoa.address,
      () => attempt(eoa.address, (typed) => eoa.signTypedData(forViem(typed))),
      /account refused the signature/,
    )
  })

  it('factory not on the allow-list: refused at confirm, nothing deployed', async () => {
    const owner = privateKeyToAccount(generatePrivateKey())
    const { address, factoryData } = payers.otherFactoryAccount(owner)
    await expectRefused(
      address,
      () =>
        attempt(address, async (typed) =>
          serializeErc6492Signature({
            address: payers.otherFactory,
            data: factoryData,
            signature: await owner.signTypedData(forViem(typed)),
          }),
        ),
      new RegExp(`factory ${payers.otherFactory} is not in chains\\.${env.anvil.caip2}\\.eip6492Factories`),
    )
    expect(await env.publicClient.getCode({ address })).toBeUndefined()
  })

  it('forged ERC-1271 signature (another key in the wrapper): refused, no gas spent', async () => {
    const { account } = await payers.coinbase(true)
    const { account: forger } = await payers.coinbase(false)
    await expectRefused(
      account.address,
      () =>
        attempt(account.address, async (typed) => {
          // The forger's wrapper: right format, wrong owner; and a bare key signature on a contract.
          const forged = await forger.sign({ hash: hashTypedData(forViem(typed)) })
          return forged
        }),
      /answered 0xffffffff/,
    )
    await expectRefused(
      account.address,
      () =>
        attempt(
          account.address,
          (typed) => privateKeyToAccount(generatePrivateKey()).signTypedData(forViem(typed)),
          { mint: false },
        ),
      /refused the signature|answered 0xffffffff/,
    )
  })
})

/** The payer's token balance: 25 of it minted for each row. */
const tetherBalance = (owner: Address) =>
  env.publicClient.readContract({ address: tether, abi: tetherAbi, functionName: 'balanceOf', args: [owner] })

// The token's faucet mints for anyone. Never sent as the executor: its sender numbers its own
// transactions (settlement batches close at any time) and an impersonated send would take one's nonce.
const faucet = '0x00000000000000000000000000000000000fa0c7' as Address

async function mintTether(to: Address, amount = usdc(25)) {
  await sendAs(faucet, {
    to: tether,
    data: encodeFunctionData({ abi: tetherAbi, functionName: 'mint', args: [to, amount] }),
  })
}

/** Sends from any address (Anvil impersonation): how a contract account's own transaction is stood in for. */
async function sendAs(from: Address, tx: { to: Address; data: Hex }): Promise<Hex> {
  await anvilRpc(env.anvil.rpcUrl, 'anvil_setBalance', [from, '0xde0b6b3a7640000'])
  await anvilRpc(env.anvil.rpcUrl, 'anvil_impersonateAccount', [from])
  const hash = await anvilRpc<Hex>(env.anvil.rpcUrl, 'eth_sendTransaction', [{ from, ...tx }])
  await anvilRpc(env.anvil.rpcUrl, 'anvil_stopImpersonatingAccount', [from])
  const receipt = await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 })
  expect(receipt.status).toBe('success')
  return hash
}

/** The wallet of an EOA (or a 7702 account): its own transactions, gas from Anvil's faucet. */
async function walletOf(account: LocalAccount) {
  await anvilRpc(env.anvil.rpcUrl, 'anvil_setBalance', [account.address, '0xde0b6b3a7640000'])
  return createWalletClient({
    account,
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
  })
}

interface Permit2Attempt extends Attempt {
  /** The methods of the option's actions, in order. */
  methods: string[]
}

/**
 * A $10 payment in the USDT-style token, offered to `payer`: its Permit2 option's approve transactions
 * are sent by `send` (the payer's own wallet), its typed data signed by `sign`, then confirmed.
 */
async function attemptPermit2(
  payer: Address,
  sign: (typed: TypedJson) => Promise<Hex>,
  send: (tx: { to: Address; data: Hex }) => Promise<Hex> = () => {
    throw new Error('This payer was not expected to send a transaction')
  },
  options: { mint?: boolean } = {},
): Promise<Permit2Attempt> {
  if (options.mint !== false) await mintTether(payer)
  const { paymentId } = await env.pay('1000')
  const offered = await env.gw('POST', paymentId, '/options', { accounts: [`${env.anvil.caip2}:${payer}`] })
  expect(offered.statusCode, offered.body).toBe(200)
  const option = offered.json.options.find((o: { actions: { walletRpc: { params: string } }[] }) =>
    o.actions.some((a) => a.walletRpc.params.includes('PermitWitnessTransferFrom')),
  )
  expect(option, offered.body).toBeDefined()
  const results: string[] = []
  for (const { walletRpc } of option.actions) {
    const params = JSON.parse(walletRpc.params)
    if (walletRpc.method === 'eth_sendTransaction')
      results.push(await send({ to: params[0].to, data: params[0].data }))
    else results.push(await sign(JSON.parse(params[1]) as TypedJson))
  }
  const res = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
  return {
    paymentId,
    signature: results.at(-1) as Hex,
    status: res.statusCode,
    body: res.json,
    methods: option.actions.map((a: { walletRpc: { method: string } }) => a.walletRpc.method),
  }
}

async function expectPaidPermit2(row: string, payer: Address, run: Promise<Permit2Attempt>) {
  const attempt = await run
  expect(attempt.status, JSON.stringify(attempt.body)).toBe(200)
  const final = await env.waitFinal(attempt.paymentId)
  expect(final.status).toBe('succeeded')
  expect(await tetherBalance(payer)).toBe(usdc(25) - amount)
  gas[`permit2 ${row}`] = await executorGas(attempt.paymentId)
  return attempt
}

async function expectRefusedPermit2(payer: Address, run: () => Promise<Permit2Attempt>, reason: RegExp) {
  const before = await tetherBalance(payer)
  const { paymentId, status, body } = await run()
  expect(status, JSON.stringify(body)).toBe(400)
  expect(body.message).toMatch(reason)
  expect(await tetherBalance(payer)).toBe(before)
  expect(
    await env.t.db
      .selectFrom('evm_transactions')
      .select('hash')
      .where('payment_id', '=', paymentId)
      .execute(),
  ).toEqual([])
}

const relayRows = (paymentId: string) =>
  env.t.db
    .selectFrom('evm_transactions')
    .select(['hash', 'status'])
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', 'relay')
    .orderBy('nonce')
    .orderBy('created_at')
    .execute()
const relayHashes = async (paymentId: string) => (await relayRows(paymentId)).map((r) => r.hash as Hex)
const relayStatuses = async (paymentId: string) => (await relayRows(paymentId)).map((r) => r.status)

async function poll<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = await check()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** The account approved Permit2 for good, as smart-account wallets do once (their own transaction). */
const approvePermit2 = (account: Address) =>
  sendAs(account, {
    to: tether,
    data: encodeFunctionData({ abi: tetherAbi, functionName: 'approve', args: [permit2Address, maxUint256] }),
  })

describe('payer matrix (Permit2, a USDT-style token without EIP-3009)', () => {
  it('EOA without an allowance: approve(Permit2, amount) first in the option, then the witness transfer', async () => {
    const eoa = privateKeyToAccount(generatePrivateKey())
    const wallet = await walletOf(eoa)
    const paid = await expectPaidPermit2(
      'eoa',
      eoa.address,
      attemptPermit2(
        eoa.address,
        (typed) => eoa.signTypedData(forViem(typed)),
        (tx) => wallet.sendTransaction(tx),
      ),
    )
    expect(paid.methods).toEqual(['eth_sendTransaction', 'eth_signTypedData_v4'])
    // Bounded to the amount: nothing is left for Permit2 to take.
    const allowance = await env.publicClient.readContract({
      address: tether,
      abi: tetherAbi,
      functionName: 'allowance',
      args: [eoa.address, permit2Address],
    })
    expect(allowance).toBe(0n)
  })

  it('EOA with a short non-zero allowance: reset to zero, approve, transfer (the USDT rule)', async () => {
    const eoa = privateKeyToAccount(generatePrivateKey())
    const wallet = await walletOf(eoa)
    await wallet.sendTransaction({
      to: tether,
      data: encodeFunctionData({ abi: tetherAbi, functionName: 'approve', args: [permit2Address, 1n] }),
    })
    const paid = await expectPaidPermit2(
      'eoa-reset',
      eoa.address,
      attemptPermit2(
        eoa.address,
        (typed) => eoa.signTypedData(forViem(typed)),
        (tx) => wallet.sendTransaction(tx),
      ),
    )
    expect(paid.methods).toEqual(['eth_sendTransaction', 'eth_sendTransaction', 'eth_signTypedData_v4'])
  })

  it('Safe 1.4.1 with an allowance: ERC-1271 through Permit2', async () => {
    const { owner, address } = await payers.safeAccount()
    await mintTether(address)
    await approvePermit2(address)
    const paid = await expectPaidPermit2(
      'safe',
      address,
      attemptPermit2(
        address,
        (typed) => signAsSafeOwner(owner, address, env.anvil.chainId, hashTypedData(forViem(typed))),
        undefined,
        { mint: false },
      ),
    )
    expect(paid.methods).toEqual(['eth_signTypedData_v4'])
  })

  it('Coinbase-style smart wallet with an allowance; the same signature again is refused', async () => {
    const { account } = await payers.coinbase(true)
    await mintTether(account.address)
    await approvePermit2(account.address)
    const paid = await expectPaidPermit2(
      'coinbase',
      account.address,
      attemptPermit2(account.address, (typed) => account.signTypedData(forViem(typed) as never), undefined, {
        mint: false,
      }),
    )
    await mintTether(account.address, amount)
    await expectRefusedPermit2(
      account.address,
      () => attemptPermit2(account.address, async () => paid.signature, undefined, { mint: false }),
      /answered 0xffffffff/,
    )
  })

  it('EIP-7702 account with a permissive delegate: approves itself, then pays', async () => {
    const eoa = await payers.delegated(payers.permissiveDelegate)
    const wallet = await walletOf(eoa)
    await expectPaidPermit2(
      'eip7702-permissive',
      eoa.address,
      attemptPermit2(
        eoa.address,
        (typed) => eoa.signTypedData(forViem(typed)),
        (tx) => wallet.sendTransaction(tx),
      ),
    )
  })

  it('the allowance withdrawn under a sent pull (ahead of it in its block): one revert, the payment fails relay_reverted and the payer is cooled down; approving again sends nothing more', async () => {
    const eoa = privateKeyToAccount(generatePrivateKey())
    const wallet = await walletOf(eoa)
    await mintTether(eoa.address)
    const approve = (value: bigint, fees: { maxFeePerGas?: bigint; maxPriorityFeePerGas?: bigint } = {}) =>
      wallet.sendTransaction({
        to: tether,
        data: encodeFunctionData({ abi: tetherAbi, functionName: 'approve', args: [permit2Address, value] }),
        ...fees,
      })
    await approve(maxUint256)
    const rpc = env.anvil.rpcUrl
    await anvilRpc(rpc, 'evm_setAutomine', [false])
    let paymentId: string
    let pull: Hex
    try {
      const sent = await attemptPermit2(
        eoa.address,
        (typed) => eoa.signTypedData(forViem(typed)),
        undefined,
        {
          mint: false,
        },
      )
      expect(sent.status, JSON.stringify(sent.body)).toBe(200)
      paymentId = sent.paymentId
      pull = await poll('the pull in the mempool', async () => {
        const [row] = await relayHashes(paymentId)
        return row && (await anvilRpc(rpc, 'eth_getTransactionByHash', [row])) ? row : undefined
      })
      // The payer's withdrawal lands in the same block, ahead of the pull (a higher tip).
      await approve(0n, { maxFeePerGas: parseGwei('500'), maxPriorityFeePerGas: parseGwei('400') })
      await anvilRpc(rpc, 'evm_mine', [])
    } finally {
      await anvilRpc(rpc, 'evm_setAutomine', [true])
    }
    expect((await env.publicClient.getTransactionReceipt({ hash: pull })).status).toBe('reverted')
    await poll('the reverted pull recorded', async () =>
      (await relayStatuses(paymentId)).includes('reverted') ? true : undefined,
    )
    // Withdrawing an allowance between a pull's simulation and its block is how a payer makes the
    // executor pay for nothing, again and again if it were relayed again: one revert ends it.
    expect((await env.waitFinal(paymentId)).status).toBe('failed')
    const failed = await env.t.db
      .selectFrom('payments')
      .select('failure_code')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(failed.failure_code).toBe('relay_reverted')
    const cooled = await env.t.db
      .selectFrom('payer_cooldowns')
      .select('subject')
      .where('subject', '=', eoa.address.toLowerCase())
      .executeTakeFirst()
    expect(cooled).toBeDefined()

    await approve(maxUint256)
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(await tetherBalance(eoa.address)).toBe(usdc(25))
    expect(await relayStatuses(paymentId)).toEqual(['reverted'])
  })

  it('a pull that landed while its job was away (worker stopped mid-wait) is found, not waited for: the allowance it used is not asked for again', async () => {
    const eoa = privateKeyToAccount(generatePrivateKey())
    const wallet = await walletOf(eoa)
    await mintTether(eoa.address)
    const rpc = env.anvil.rpcUrl
    const sent = await attemptPermit2(
      eoa.address,
      (typed) => eoa.signTypedData(forViem(typed)),
      async (tx) => {
        const hash = await wallet.sendTransaction(tx)
        await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 })
        // Blocks on request from here: the pull waits in the pool until the worker is gone.
        await anvilRpc(rpc, 'evm_setAutomine', [false])
        return hash
      },
      { mint: false },
    )
    let paymentId: string
    try {
      expect(sent.status, JSON.stringify(sent.body)).toBe(200)
      paymentId = sent.paymentId
      const pull = await poll('the pull in the mempool', async () => {
        const [hash] = await relayHashes(paymentId)
        return hash && (await anvilRpc(rpc, 'eth_getTransactionByHash', [hash])) ? hash : undefined
      })
      await runner.stop()
      await anvilRpc(rpc, 'evm_mine', [])
      expect((await env.publicClient.getTransactionReceipt({ hash: pull })).status).toBe('success')
    } finally {
      await anvilRpc(rpc, 'evm_setAutomine', [true])
      runner = env.startRunner()
    }
    // The pull used the payer's allowance (approve(Permit2, amount) of the option): 0 left, by design.
    expect((await env.waitFinal(paymentId)).status).toBe('succeeded')
    expect(await tetherBalance(eoa.address)).toBe(usdc(25) - amount)
    expect(await relayStatuses(paymentId)).toEqual(['succeeded'])
  })

  it('strict delegate, undeployed account, forged signature: refused at confirm, nothing moved', async () => {
    const strict = await payers.delegated(payers.strictDelegate)
    const strictWallet = await walletOf(strict)
    await mintTether(strict.address)
    await expectRefusedPermit2(
      strict.address,
      () =>
        attemptPermit2(
          strict.address,
          (typed) => strict.signTypedData(forViem(typed)),
          (tx) => strictWallet.sendTransaction(tx),
          { mint: false },
        ),
      /account refused the signature/,
    )
    const { account: undeployed } = await payers.coinbase(false)
    await mintTether(undeployed.address)
    await expectRefusedPermit2(
      undeployed.address,
      () =>
        attemptPermit2(
          undeployed.address,
          (typed) => undeployed.signTypedData(forViem(typed) as never),
          // Its approve cannot be sent before the account exists; the option's signature is refused anyway.
          async () => `0x${'00'.repeat(32)}`,
          { mint: false },
        ),
      /Permit2 cannot deploy an ERC-6492 account/,
    )
    const { account } = await payers.coinbase(true)
    await mintTether(account.address)
    await approvePermit2(account.address)
    await expectRefusedPermit2(
      account.address,
      () =>
        attemptPermit2(
          account.address,
          (typed) => privateKeyToAccount(generatePrivateKey()).signTypedData(forViem(typed)),
          undefined,
          { mint: false },
        ),
      /refused the signature|answered 0xffffffff/,
    )
  })
})

describe('wallet library: evmSigner with smart accounts, through the guard', () => {
  const payWith = async (signer: ReturnType<typeof evmSigner>, pick: (o: any) => boolean) => {
    const { paymentId, gatewayUrl } = await env.pay('1000')
    const client = createPayClient({
      baseUrl: env.t.app.config.publicBaseUrl,
      apiKey: env.walletKey,
      fetch: injectFetch(env),
      signers: [signer],
      poll: { sleep: () => new Promise((resolve) => setTimeout(resolve, 25)) },
    })
    const result = await client.pay(gatewayUrl, { selectOption: (options) => options.find(pick)!.id })
    expect(result).toMatchObject({ paymentId, status: 'succeeded' })
  }
  const chains = () => ({ [env.anvil.caip2]: { rpcUrl: env.anvil.rpcUrl } })

  it('a deployed and an undeployed Coinbase-style account pay EIP-3009 as themselves (ERC-1271, ERC-6492)', async () => {
    for (const deployed of [true, false]) {
      const { account } = await payers.coinbase(deployed)
      await mintTestToken(env.anvil.rpcUrl, env.token, account.address, usdc(25))
      const signer = evmSigner({ account, chains: chains(), pollingInterval: 50 })
      // The options request advertises the smart account, not its owner.
      expect(signer.accounts()).toEqual([`${env.anvil.caip2}:${account.address}`])
      await payWith(signer, isKind('eip3009'))
      expect(await env.balance(account.address)).toBe(usdc(15))
    }
  })

  it('an EOA pays a Permit2 option: the guard reads the approve and the permit as one movement', async () => {
    const eoa = privateKeyToAccount(generatePrivateKey())
    await walletOf(eoa)
    await mintTether(eoa.address)
    const signer = evmSigner({
      account: eoa,
      chains: chains(),
      pollingInterval: 50,
      spenders: [`${env.anvil.caip2}:${permit2Address}`],
    })
    await payWith(signer, (o) =>
      o.actions.some((a: any) => a.walletRpc.params.includes('PermitWitnessTransferFrom')),
    )
    expect(await tetherBalance(eoa.address)).toBe(usdc(15))
  })
})
