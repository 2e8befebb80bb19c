/**
 * What a React Native wallet bundles, in three variants run by test/wallet/reactNative.test.ts in a realm
 * with Hermes' globals only: the library with its EVM adapter and viem, with its Solana adapter and
 * @solana/web3.js, or with its kit entry and @solana/kit alone. Not a test file itself.
 */
import type { Signer } from '../../src/actions/types.js'
import { createPayClient, type PaymentOption } from '../../src/index.js'

export interface RealmPayInput {
  baseUrl: string
  apiKey: string
  link: string
}

export async function payWith(signer: Signer, input: RealmPayInput) {
  const client = createPayClient({ baseUrl: input.baseUrl, apiKey: input.apiKey, signers: [signer] })
  const result = await client.pay(input.link, {
    // One action: the plain option of that namespace (not the mixed EVM + Solana one).
    selectOption: (options: readonly PaymentOption[]) => {
      const option = options.find((o) => o.actions.length === 1)
      if (!option) throw new Error('no single-action option')
      return option.id
    },
  })
  return { status: result.status, txId: result.txId, account: signer.accounts()[0] }
}
