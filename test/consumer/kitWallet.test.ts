/**
 * A wallet on @solana/kit alone (issue 43): a fresh project that installs the packed caipay tarball and
 * @solana/kit, and no @solana/web3.js, pays a live Solana payment (the litesvm cluster, the server in
 * live mode) with a kit key pair signer through caipay/adapters/solana-kit; the transaction lands.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type SolanaLive, startSolanaLive } from '../solana-live/live.js'
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
})
