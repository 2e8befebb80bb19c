/**
 * Paying x402 resources on Solana with caipay: `npx tsx examples/x402-pay-solana.ts`
 *
 * Starts a local Solana cluster with a USDC-like mint, caipay as the facilitator (its key pays the
 * fees), and an x402 resource server (`@x402/hono`, `@x402/svm`). A wallet that holds tokens and no SOL
 * pays `GET /weather` with `caipay/x402`'s x402Fetch, caipay's Solana signer and the adapter's
 * transaction builder, within a budget: 0.01 USDC per request and 0.02 USDC per origin, so the third
 * request is refused before anything is signed.
 */
import { createAssociatedTokenAccountIdempotent } from '@solana/spl-token'
import { Keypair, LAMPORTS_PER_SOL, PublicKey } from '@solana/web3.js'
import { solanaSigner, solanaX402Builder } from '../adapters/solana/index.js'
import { x402Fetch } from '../src/x402/index.js'
import { airdrop } from '../test/solana/index.js'
import { startLiveExample } from './liveExample.js'
import { buyWeatherThrice, startWeatherShop } from './x402Shop.js'

const { solana, server, apiKey, close } = await startLiveExample({ solana: true })
const chain = solana!
const network = chain.caip2 as `${string}:${string}`
const mint = chain.asset.slice(chain.asset.lastIndexOf(':') + 1)
const { connection } = chain.cluster
try {
  // x402 pays into the merchant's existing token account; on a fresh cluster someone opens it first.
  const opener = Keypair.generate()
  await airdrop(connection, opener.publicKey, LAMPORTS_PER_SOL)
  await createAssociatedTokenAccountIdempotent(connection, opener, new PublicKey(mint), chain.merchant)

  const shop = await startWeatherShop({
    caipayUrl: server.url,
    apiKey,
    network,
    token: mint,
    payTo: chain.merchant.toBase58(),
    amount: '10000',
  })
  try {
    const pay = x402Fetch(fetch, {
      signers: [solanaSigner({ keypair: chain.buyer, chains: [network] })],
      // Reads the mint and a recent blockhash from the wallet's own node to build each payment.
      solana: solanaX402Builder({ connection }),
      budget: { perRequest: { [chain.asset]: '10000' }, perOrigin: { [chain.asset]: '20000' } },
    })
    await buyWeatherThrice(pay, shop)
    const b = await chain.balances()
    const lamports = await connection.getBalance(chain.buyer.publicKey)
    console.log(`merchant received ${b.merchant} minor units; the buyer holds ${lamports} lamports`)
  } finally {
    await shop.close()
  }
} finally {
  await close()
}
