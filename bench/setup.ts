/** Accounts and payments the load runs use, made the way a partner would (keys in the database, the rest over HTTP). */
import { createMerchantClient } from '../src/client/index.js'
import { createApiKey, createPartner } from '../src/server/accounts/accounts.js'
import { openDatabase } from '../src/server/store/db.js'

export interface BenchAccounts {
  partnerId: string
  /** Partner-role test key. */
  apiKey: string
  /** Wallet-role test key of the same partner (gateway only). */
  walletKey: string
}

/** Migrates `databaseUrl` and creates a partner with a partner key and a wallet key. */
export async function createAccounts(databaseUrl: string): Promise<BenchAccounts> {
  const database = await openDatabase({ databaseUrl })
  try {
    const partnerId = await createPartner(database.db, { name: 'bench' })
    const { apiKey } = await createApiKey(database.db, { partnerId, mode: 'test', role: 'partner' })
    const { apiKey: walletKey } = await createApiKey(database.db, { partnerId, mode: 'test', role: 'wallet' })
    return { partnerId, apiKey, walletKey }
  } finally {
    await database.close()
  }
}

export const usdcBase = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'

/** A merchant with a crypto settlement for USDC on Base (so test-mode payments settle too). */
export async function createMerchant(baseUrl: string, apiKey: string, name: string): Promise<string> {
  const api = createMerchantClient({ baseUrl, apiKey })
  const { merchant } = await api.createMerchant({
    body: { merchantName: name, merchantEmail: `${name.toLowerCase().replace(/\W+/g, '')}@bench.example` },
  })
  await api.createCryptoSettlements({
    params: { merchantId: merchant.id },
    body: {
      settlements: [
        { asset: usdcBase, destination: 'eip155:8453:0x2222222222222222222222222222222222222222' },
      ],
    },
  })
  return merchant.id
}

/** `count` payments over HTTP, `concurrency` at a time; their ids. */
export async function createPayments(
  baseUrl: string,
  apiKey: string,
  merchantId: string,
  count: number,
  concurrency = 8,
): Promise<string[]> {
  const api = createMerchantClient({ baseUrl, apiKey, merchantId })
  const ids: string[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const n = next++
        const payment = await api.createPayment({
          body: { referenceId: `setup-${n}`, amount: { unit: 'iso4217/USD', value: '1250' } },
        })
        ids.push(payment.paymentId)
      }
    }),
  )
  return ids
}
