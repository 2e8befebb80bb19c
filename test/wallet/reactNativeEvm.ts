import { privateKeyToAccount } from 'viem/accounts'
import { evmSigner } from '../../adapters/evm/index.js'
import { payWith, type RealmPayInput } from './reactNativeWallet.js'

export async function pay(input: RealmPayInput & { key: `0x${string}`; chain: string }) {
  // Test mode only signs typed data: the RPC is never called.
  const signer = evmSigner({
    account: privateKeyToAccount(input.key),
    chains: { [input.chain]: { rpcUrl: 'http://127.0.0.1:9' } },
  })
  return payWith(signer, input)
}
