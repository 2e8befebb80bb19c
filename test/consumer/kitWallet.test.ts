/**
 * A wallet on @solana/kit alone (issue 43): a fresh project that installs the packed caipay tarball and
 * @solana/kit, and no @solana/web3.js, pays a live Solana payment (the litesvm cluster, the server in
 * live mode) with a kit key pair signer through caipay/adapters/solana-kit; the transaction lands. The
 * entry's revokeSplMandate and solanaMandateStatus revoke an SPL mandate on that cluster.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaSigner } from '../../adapters/solana/index.js'
import { type SolanaLive, startSolanaLive } from '../solana-live/live.js'
import { delegationOf, grantSplMandate } from '../subscriptions/splMandate.js'
import { cleanEnv, exec, npm, packTarballs, project, repo } from './pack.js'

const kitVersion = JSON.parse(
  await fs.readFile(path.join(repo, 'node_modules', '@solana', 'kit', 'package.json'), 'utf8'),
).version as string

/** What the wallet app runs: caipay's kit entry, a kit signer and a kit RPC to its own node. */
const walletProgram = `import { createKeyPairSignerFromBytes, createSolanaRpc } from '@solana/kit'
import { createPayClient } from 'caipay'
import { solanaSigner } from 'caipay/adapters/solana-kit'
import { createReviewer } from 'caipay/review'

const input = JSON.parse(process.argv[2])
const kitSigner = await createKeyPairSignerFromBytes(Uint8Array.from(input.secretKey))
const signer = solanaSigner({ kitSigner, chains: [input.chain], rpc: createSolanaRpc(input.rpcUrl) })
const client = createPayClient({
  baseUrl: input.baseUrl,
  apiKey: input.apiKey,
  trustedHosts: ['127.0.0.1'],
  signers: [signer],
  poll: { intervalMs: 50 },
  review: createReviewer(),
})
let review
const result = await client.pay(input.link, {
  onReview: (shown) => {
    review = shown
    return true
  },
})
const web3 = await import('caipay/adapters/solana').then(() => 'loaded', (error) => error.code)
console.log(
  JSON.stringify({ status: result.status, txId: result.txId, address: kitSigner.address, review, web3 }, (_, v) =>
    typeof v === 'bigint' ? v.toString() : v,
  ),
)
`

/**
 * What a kit wallet runs to take back an SPL mandate it granted (docs/subscriptions.md): its status read
 * from its node, a non-SPL mandate refused, the revoke signed by the kit signer, the status read again.
 * Both functions take a Connection-shaped node; without web3.js the wallet shapes its kit RPC as one.
 */
const revokeProgram = `import { createKeyPairSignerFromBytes, createSolanaRpc } from '@solana/kit'
import { isPayError } from 'caipay'
import { revokeSplMandate, solanaMandateStatus, solanaSigner } from 'caipay/adapters/solana-kit'

const input = JSON.parse(process.argv[2])
const rpc = createSolanaRpc(input.rpcUrl)
const node = {
  isBlockhashValid: (blockhash, config) => rpc.isBlockhashValid(blockhash, config).send(),
  getSignatureStatus: async (signature, config) => ({
    value: (await rpc.getSignatureStatuses([signature], config).send()).value[0],
  }),
  async getAccountInfo(key, commitment) {
    const { value } = await rpc.getAccountInfo(key.toBase58(), { commitment, encoding: 'base64' }).send()
    return value && { owner: { toBase58: () => value.owner }, data: Buffer.from(value.data[0], 'base64') }
  },
  getLatestBlockhash: async (config) => (await rpc.getLatestBlockhash(config).send()).value,
  sendRawTransaction: (bytes, options) =>
    rpc.sendTransaction(Buffer.from(bytes).toString('base64'), { encoding: 'base64', ...options }).send(),
}
const kitSigner = await createKeyPairSignerFromBytes(Uint8Array.from(input.secretKey))
const signer = solanaSigner({
  kitSigner,
  chains: [input.chain],
  allowFeePayer: true,
  delegates: [input.request.subscription.spender],
})
const { mandate } = signer.inspect(input.request)
const status = solanaMandateStatus(node, kitSigner.address, (request) => signer.inspect(request))
const before = await status(input.request, input.signed)
const refused = await revokeSplMandate(node, { ...mandate, kind: 'permit2' }, () => {
  throw new Error('signed a refused revoke')
}).then(
  () => 'revoked',
  (error) => ({ payError: isPayError(error), code: error.code }),
)
const signature = await revokeSplMandate(node, mandate, async (decoded) => {
  const message = { messageBytes: decoded.messageBytes, signatures: { [kitSigner.address]: null } }
  const [signatures] = await kitSigner.signTransactions([message])
  return signatures[kitSigner.address]
})
const after = await status(input.request, input.signed)
console.log(JSON.stringify({ before, refused, signature, after }))
`

let work: string
let wallet: string
let live: SolanaLive
let baseUrl: string

beforeAll(async () => {
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-kit-wallet-'))
  const { caipay } = await packTarballs(work)
  wallet = path.join(work, 'wallet')
  await project(wallet, { caipay: `file:${caipay}`, '@solana/kit': kitVersion })
  await npm(['install', '--prefer-offline'], wallet)
  await fs.writeFile(path.join(wallet, 'pay.mjs'), walletProgram)
  await fs.writeFile(path.join(wallet, 'revoke.mjs'), revokeProgram)
  // Started after the install: web3.js (the harness's side) waits for a new blockhash after 30 s of
  // idling, and litesvm's changes only when a transaction lands.
  live = await startSolanaLive()
  baseUrl = await live.t.app.listen({ port: 0, host: '127.0.0.1' })
  live.startRunner()
}, 1_800_000)

afterAll(async () => {
  await live?.close()
  if (work) await fs.rm(work, { recursive: true, force: true })
})

describe('a kit-only wallet (caipay + @solana/kit, no web3.js), from the packed tarball', () => {
  it('installs no web3.js: it resolves nowhere in the project', async () => {
    const lock = JSON.parse(await fs.readFile(path.join(wallet, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, unknown>
    }
    const installed = Object.keys(lock.packages).map((key) => key.replace(/^.*node_modules\//, ''))
    expect(installed).toContain('@solana/kit')
    expect(installed).not.toContain('@solana/web3.js')
    const resolved = await exec(
      process.execPath,
      [
        '-e',
        "try { require.resolve('@solana/web3.js'); console.log('found') } catch (e) { console.log(e.code) }",
      ],
      { cwd: wallet, env: cleanEnv },
    )
    expect(resolved.stdout.trim()).toBe('MODULE_NOT_FOUND')
  })

  it('pays a live Solana payment with a kit signer; the transaction lands and the tokens move', {
    timeout: 120_000,
  }, async () => {
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const { gatewayUrl, paymentId } = await live.createPayment(merchantId)
    const before = await live.balance(buyer.publicKey)
    const input = {
      secretKey: [...buyer.secretKey],
      chain: live.caip2,
      rpcUrl: live.validator.rpcUrl,
      baseUrl,
      apiKey: live.liveKey,
      link: gatewayUrl,
    }
    const run = await exec(process.execPath, ['pay.mjs', JSON.stringify(input)], {
      cwd: wallet,
      env: cleanEnv,
    })
    const output = JSON.parse(run.stdout.trim().split('\n').at(-1)!)
    expect(output).toMatchObject({ status: 'succeeded', address: buyer.publicKey.toBase58() })
    // caipay/adapters/solana needs web3.js, which this wallet does not have; the kit entry did not.
    expect(output.web3).toBe('ERR_MODULE_NOT_FOUND')
    // The review named the token from the wallet's own node (kit RPC), not from the gateway.
    expect(output.review.actions[0].moves[0]).toMatchObject({
      asset: { id: live.asset, decimals: 6, source: 'node' },
      amount: '12500000',
    })

    const settled = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    expect(settled.info.txId).toBe(output.txId)
    const { value } = await live.validator.connection.getSignatureStatuses([output.txId], {
      searchTransactionHistory: true,
    })
    expect(value[0]).toMatchObject({ err: null })
    expect(await live.balance(buyer.publicKey)).toBe(before - 12_500_000n)
    expect(await live.balance(merchantOwner.publicKey)).toBe(12_500_000n)
  })

  it("revokes an SPL mandate with the kit entry's revokeSplMandate; solanaMandateStatus reads it live, then ended", {
    timeout: 60_000,
  }, async () => {
    const buyer = Keypair.generate()
    const charger = Keypair.generate().publicKey
    const { connection, caip2 } = live.validator
    // The grant, signed by the harness's wallet (web3.js) and landed: 12 tokens delegated to the charger.
    const granting = solanaSigner({
      keypair: buyer,
      chains: [caip2],
      connection,
      allowFeePayer: true,
      delegates: [`${caip2}:${charger.toBase58()}`],
    })
    const granted = await grantSplMandate(live.validator, granting, buyer, charger)
    expect(await delegationOf(live.validator, granted.source)).toEqual([charger.toBase58(), 12_000_000n])
    const input = {
      secretKey: [...buyer.secretKey],
      chain: caip2,
      rpcUrl: live.validator.rpcUrl,
      request: {
        chainId: caip2,
        method: 'solana_signTransaction',
        params: [{ transaction: granted.transaction }],
        subscription: granted.terms,
      },
      signed: granted.signed,
    }
    const run = await exec(process.execPath, ['revoke.mjs', JSON.stringify(input)], {
      cwd: wallet,
      env: cleanEnv,
    })
    const output = JSON.parse(run.stdout.trim().split('\n').at(-1)!)
    expect(output).toMatchObject({
      before: 'live',
      refused: { payError: true, code: 'invalid_action' },
      after: 'ended',
    })
    // The revoke landed, and the runtime cleared the delegation.
    const { value } = await connection.getSignatureStatuses([output.signature], {
      searchTransactionHistory: true,
    })
    expect(value[0]).toMatchObject({ err: null })
    expect(await delegationOf(live.validator, granted.source)).toEqual([null, 0n])
  })
})
