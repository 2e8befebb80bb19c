import { ContractFunctionExecutionError, ContractFunctionRevertedError } from 'viem'
import { describe, expect, it } from 'vitest'
import { eip3009Abi } from './abi.js'
import { refuseOnRevert } from './transfers.js'

const refused = (reason: string) => new Error(`refused: ${reason}`)

describe('refuseOnRevert', () => {
  it("turns the contract's revert into the caller's refusal, with the reason", async () => {
    const revert = new ContractFunctionExecutionError(
      new ContractFunctionRevertedError({
        abi: eip3009Abi,
        functionName: 'transfer',
        message: 'balance short',
      }),
      { abi: eip3009Abi, functionName: 'transfer', args: [] },
    )
    await expect(refuseOnRevert(Promise.reject(revert), refused)).rejects.toThrow('refused: balance short')
  })

  it('passes any other error (RPC down, timeout) through unchanged: it is not final', async () => {
    const down = new Error('fetch failed')
    await expect(refuseOnRevert(Promise.reject(down), refused)).rejects.toBe(down)
  })

  it("resolves with the simulation's own answer when it succeeds", async () => {
    const answer = { result: true }
    await expect(refuseOnRevert(Promise.resolve(answer), refused)).resolves.toBe(answer)
  })
})
