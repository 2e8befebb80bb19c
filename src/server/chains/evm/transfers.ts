import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  parseEventLogs,
  type TransactionReceipt,
} from 'viem'
import { eip3009Abi } from './abi.js'
import type { EvmChain } from './chain.js'

export interface ExpectedTransfer {
  token: Address
  from: Address
  to: Address
  value: bigint
}

/**
 * Whether the receipt carries the ERC-20 `Transfer` the payment needs: emitted by the token itself (any
 * contract can emit an event named Transfer), from the payer, to the payee, of exactly the amount.
 */
export function hasTransfer(receipt: TransactionReceipt, expected: ExpectedTransfer): boolean {
  if (receipt.status !== 'success') return false
  const transfers = parseEventLogs({
    abi: eip3009Abi,
    eventName: 'Transfer',
    logs: receipt.logs,
    strict: true,
  })
  return transfers.some(
    (log) =>
      same(log.address, expected.token) &&
      same(log.args.from, expected.from) &&
      same(log.args.to, expected.to) &&
      log.args.value === expected.value,
  )
}

export function same(a: string | null | undefined, b: string): boolean {
  return typeof a === 'string' && a.toLowerCase() === b.toLowerCase()
}

/**
 * The contract's own refusal (a revert, with its custom error by name when the ABI knows it), or
 * undefined when the error is something else (RPC down, timeout): only a refusal is final.
 */
function revertReason(error: unknown): string | undefined {
  if (!(error instanceof BaseError)) return undefined
  const reverted = error.walk((e) => e instanceof ContractFunctionRevertedError)
  if (!(reverted instanceof ContractFunctionRevertedError)) return undefined
  if (reverted.data?.errorName) {
    const args = (reverted.data.args ?? []).map((a) => String(a)).join(', ')
    return `${reverted.data.errorName}(${args})`
  }
  return reverted.reason ?? reverted.shortMessage
}

/** Awaits a simulation; the contract's refusal becomes `refused(reason)`, any other error passes as is. */
export async function refuseOnRevert<T>(
  simulation: Promise<T>,
  refused: (reason: string) => Error,
): Promise<T> {
  try {
    return await simulation
  } catch (error) {
    const reason = revertReason(error)
    throw reason ? refused(reason) : error
  }
}

/**
 * The gas of an ERC-20 `transfer` from the executor (also its simulation): a revert becomes an error
 * naming `what` the transfer was for (settlement, refund).
 */
export function estimateExecutorTransfer(
  chain: EvmChain,
  token: Address,
  args: readonly [Address, bigint],
  what: string,
): Promise<bigint> {
  return refuseOnRevert(
    chain.publicClient.estimateContractGas({
      account: chain.executor,
      prepare: false,
      address: token,
      abi: eip3009Abi,
      functionName: 'transfer',
      args,
    }),
    (reason) => new Error(`The token refused the ${what} transfer: ${reason}`),
  )
}
