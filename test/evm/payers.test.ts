/**
 * The payer matrix, EIP-3009 rows: each row pays (or is refused) a live payment through the gateway on one
 * shared Anvil (--hardfork prague), with balances and code read from the chain. Smart accounts sign with
 * viem's own implementations where viem has one (toCoinbaseSmartAccount, which wraps an undeployed
 * account's signature in ERC-6492 by itself).
 */
import { type Address, type Hex, hashTypedData, serializeErc6492Signature } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mintTestToken } from '../anvil.js'
import {
  coinbaseFactoryAddress,
  deployPayers,
  forViem,
  type Payers,
  signAsSafeOwner,
  type TypedJson,
} from './payers.js'
import { createEvmEnv, type EvmEnv, isKind, usdc } from './support.js'

let env: EvmEnv
let payers: Payers
/** Gas the executor paid per row (deployment + relay), for the matrix in docs/payers.md. */
const gas: Record<string, bigint> = {}

beforeAll(async () => {
  env = await createEvmEnv({
    anvilArgs: ['--hardfork', 'prague'],
    chainConfig: { eip6492Factories: [coinbaseFactoryAddress] },
  })
  payers = await deployPayers(env)
  env.startRunner()
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
