/**
 * The server of the examples and the demo (embedded PostgreSQL in a temporary directory, live on the
 * chains that run; none means test mode only), a partner with live keys, and a merchant that settles on
 * each chain.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { createMerchantClient, type MerchantClient } from '../src/client/index.js'
import {
  createApiKey,
  createPartner,
  type RunningServer,
  resolveConfig,
  startServer,
} from '../src/server/index.js'
import { type LocalEvmChain, type LocalSolanaChain, startLocalEvm, startLocalSolana } from './localChains.js'

export interface LiveChains {
  evm?: LocalEvmChain
  solana?: LocalSolanaChain
}

export async function startLiveServer(
  chains: LiveChains,
): Promise<{ server: RunningServer; dataDir: string }> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-live-'))
  const configured = Object.fromEntries(
    [chains.evm, chains.solana].filter((c) => c !== undefined).map((c) => [c.caip2, c.config]),
  )
  try {
    const server = await startServer({
      port: 0,
      dataDir,
      config: resolveConfig({ chains: configured }),
      publicBaseUrlFromListen: true,
      jobIntervalMs: 100,
    })
    return { server, dataDir }
  } catch (error) {
    await fs.rm(dataDir, { recursive: true, force: true })
    throw error
  }
}

export interface LiveMerchant {
  partnerId: string
  apiKey: string
  walletKey: string
  api: MerchantClient
  merchantId: string
}

/** A partner with live keys (partner and wallet roles) and a merchant settling on every running chain. */
export async function createLiveMerchant(server: RunningServer, chains: LiveChains): Promise<LiveMerchant> {
  const partnerId = await createPartner(server.db)
  const { apiKey } = await createApiKey(server.db, { partnerId, mode: 'live' })
  const { apiKey: walletKey } = await createApiKey(server.db, { partnerId, mode: 'live', role: 'wallet' })
  const api = createMerchantClient({ baseUrl: server.url, apiKey })
  const { merchant } = await api.createMerchant({
    body: { merchantName: 'Corner Cafe', merchantEmail: 'owner@cafe.example' },
  })
  const settlements = [
    chains.evm && { asset: chains.evm.asset, destination: `${chains.evm.caip2}:${chains.evm.merchant}` },
    chains.solana && {
      asset: chains.solana.asset,
      destination: `${chains.solana.caip2}:${chains.solana.merchant.toBase58()}`,
    },
  ].filter((s) => s !== undefined)
  await api.createCryptoSettlements({ params: { merchantId: merchant.id }, body: { settlements } })
  return { partnerId, apiKey, walletKey, api, merchantId: merchant.id }
}

/** The settlement txId once the merchant was paid out; undefined when the payment has no settlement step. */
export async function waitForSettlement(api: MerchantClient, merchantId: string, paymentId: string) {
  for (let i = 0; i < 200; i++) {
    const view = await api.getPayment({ merchantId, params: { id: paymentId } })
    if (!view.settlement) return undefined
    if (view.settlement.successful) return view.settlement.successful.txId
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return undefined
}

/** Everything at once, for the single-chain examples. */
export async function startLiveExample(which: { evm?: boolean; solana?: boolean }) {
  const chains: LiveChains = {}
  try {
    if (which.evm) chains.evm = await startLocalEvm('CAIPAY_EXAMPLE_EVM_KEY')
    if (which.solana) chains.solana = await startLocalSolana('CAIPAY_EXAMPLE_SOLANA_KEY')
  } catch (error) {
    await stopChains(chains)
    throw error
  }
  const { server, dataDir } = await startLiveServer(chains).catch(async (error) => {
    await stopChains(chains)
    throw error
  })
  const close = async () => {
    await server.stop()
    await stopChains(chains)
    await fs.rm(dataDir, { recursive: true, force: true })
  }
  try {
    const merchant = await createLiveMerchant(server, chains)
    for (const chain of [chains.evm, chains.solana]) if (chain) console.log(`${chain.caip2}: ${chain.asset}`)
    console.log(`Server at ${server.url}, merchant ${merchant.merchantId}`)
    return { ...chains, ...merchant, server, close }
  } catch (error) {
    await close()
    throw error
  }
}

export async function stopChains(chains: LiveChains): Promise<void> {
  await Promise.allSettled([chains.evm?.stop(), chains.solana?.stop()])
}
