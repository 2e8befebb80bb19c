import { PayError } from '../../src/errors/PayError.js'

/** Wallet RPC methods the EVM signer executes (spec, gateway flow rule 5). */
export const evmMethods = [
  'eth_sendTransaction',
  'eth_signTypedData_v4',
  'eth_signTypedData_v3',
  'eth_signTypedData',
  'personal_sign',
] as const

export type EvmMethod = (typeof evmMethods)[number]

export function assertEvmMethod(method: string): asserts method is EvmMethod {
  if (!(evmMethods as readonly string[]).includes(method)) {
    throw new PayError({
      code: 'unsupported_method',
      message: 'The EVM signer does not implement this method.',
      context: { method, supported: evmMethods },
    })
  }
}
