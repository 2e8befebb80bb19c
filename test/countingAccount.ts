import type { Hex, LocalAccount } from 'viem'
import { privateKeyToAccount, toAccount } from 'viem/accounts'

/** A real key whose every signature is counted: proof that a refused action was never signed. */
export function countingAccount(key: Hex): { account: LocalAccount; calls: () => number } {
  const real = privateKeyToAccount(key)
  let count = 0
  const counted = <T>(sign: () => Promise<T>) => {
    count++
    return sign()
  }
  const account = toAccount({
    address: real.address,
    signMessage: (args) => counted(() => real.signMessage(args)),
    signTransaction: (tx, options) => counted(() => real.signTransaction(tx, options as never)),
    signTypedData: (args) => counted(() => real.signTypedData(args as never)),
  })
  return { account, calls: () => count }
}
