/**
 * Local chains for the examples and the demo: Anvil with the TestUSDC token, and a Solana cluster
 * (the real `solana-test-validator` when installed, else the litesvm facade) with a USDC-like mint.
 * Each returns the live-config entry for the server and a balance reader.
 */
import { Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { type Address, createPublicClient, http } from 'viem'
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts'
import { testUsdcAbi } from '../fixtures/token/index.js'
import { encodeBase58 } from '../src/server/chains/solana/index.js'
import {
  type AnvilInstance,
  anvilPrivateKeys,
  deployTestToken,
  mintTestToken,
  startAnvil,
} from '../test/anvil.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
  tokenBalance,
} from '../test/solana/index.js'

const usdcAsset = { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' }

export interface LocalEvmChain {
  anvil: AnvilInstance
  caip2: string
  asset: string
  buyer: PrivateKeyAccount
  /** Where the merchant's settlements land. */
  merchant: Address
  collection: Address
  /** The chain's entry for the server's `chains` config; the key is read from `signerKeyEnv`. */
  config: Record<string, unknown>
  balances(): Promise<{ buyer: bigint; collection: bigint; merchant: bigint }>
  stop(): Promise<void>
}

/** Anvil + TestUSDC; the buyer holds `buyerFunds` minor units. */
export async function startLocalEvm(signerKeyEnv: string, buyerFunds = 100_000_000n): Promise<LocalEvmChain> {
  const anvil = await startAnvil()
  try {
    const token = await deployTestToken(anvil.rpcUrl)
    const serviceKey = anvilPrivateKeys[1]
    const buyer = privateKeyToAccount(anvilPrivateKeys[2])
    const merchant = privateKeyToAccount(generatePrivateKey()).address
    const collection = privateKeyToAccount(serviceKey).address
    await mintTestToken(anvil.rpcUrl, token, buyer.address, buyerFunds)
    process.env[signerKeyEnv] = serviceKey
    const asset = `${anvil.caip2}/erc20:${token}`
    const client = createPublicClient({ transport: http(anvil.rpcUrl) })
    const balanceOf = (address: Address) =>
      client.readContract({ address: token, abi: testUsdcAbi, functionName: 'balanceOf', args: [address] })
    return {
      anvil,
      caip2: anvil.caip2,
      asset,
      buyer,
      merchant,
      collection,
      config: { rpcUrl: anvil.rpcUrl, signerKey: `env:${signerKeyEnv}`, assets: { [asset]: usdcAsset } },
      balances: async () => ({
        buyer: await balanceOf(buyer.address),
        collection: await balanceOf(collection),
        merchant: await balanceOf(merchant),
      }),
      stop: () => anvil.stop(),
    }
  } catch (error) {
    await anvil.stop()
    throw error
  }
}

export interface LocalSolanaChain {
  cluster: SolanaValidator
  caip2: string
  asset: string
  buyer: Keypair
  merchant: PublicKey
  collection: PublicKey
  config: Record<string, unknown>
  balances(): Promise<{ buyer: bigint; collection: bigint; merchant: bigint }>
  stop(): Promise<void>
}

/** A Solana cluster + a 6-decimal mint; the buyer holds `buyerFunds` minor units. */
export async function startLocalSolana(
  signerKeyEnv: string,
  buyerFunds = 100_000_000n,
): Promise<LocalSolanaChain> {
  const cluster = await startSolanaValidator()
  try {
    const { connection, caip2 } = cluster
    const service = Keypair.generate()
    const mintAuthority = Keypair.generate()
    const buyer = Keypair.generate()
    const merchant = Keypair.generate().publicKey
    await airdrop(connection, service.publicKey, 2 * LAMPORTS_PER_SOL)
    await airdrop(connection, mintAuthority.publicKey, 2 * LAMPORTS_PER_SOL)
    const mint = await createTestMint(connection, mintAuthority, 6)
    await mintTestTokens(connection, mintAuthority, mint, buyer.publicKey, buyerFunds)
    process.env[signerKeyEnv] = encodeBase58(service.secretKey)
    const asset = `${caip2}/token:${mint.toBase58()}`
    const balanceOf = (owner: PublicKey) => tokenBalance(connection, owner, mint)
    return {
      cluster,
      caip2,
      asset,
      buyer,
      merchant,
      collection: service.publicKey,
      config: { rpcUrl: cluster.rpcUrl, signerKey: `env:${signerKeyEnv}`, assets: { [asset]: usdcAsset } },
      balances: async () => ({
        buyer: await balanceOf(buyer.publicKey),
        collection: await balanceOf(service.publicKey),
        merchant: await balanceOf(merchant),
      }),
      stop: () => cluster.stop(),
    }
  } catch (error) {
    await cluster.stop()
    throw error
  }
}
