import { describe, expect, it } from 'vitest'
import { PayError } from '../errors/PayError.js'
import { isUserRejection } from './rejection.js'

describe('isUserRejection', () => {
  it('recognises PayError user_rejected', () => {
    expect(isUserRejection(new PayError({ code: 'user_rejected', message: 'no' }))).toBe(true)
  })

  it('recognises EIP-1193 code 4001, also deep in a cause chain', () => {
    expect(isUserRejection({ code: 4001, message: 'User rejected the request.' })).toBe(true)
    const provider = Object.assign(new Error('rejected'), { code: 4001 })
    const wrapped = new Error('Request failed', { cause: new Error('inner', { cause: provider }) })
    expect(isUserRejection(wrapped)).toBe(true)
  })

  it('does not guess from message text', () => {
    expect(isUserRejection(new Error('User rejected the request.'))).toBe(false)
    expect(isUserRejection({ code: 4100 })).toBe(false)
    expect(isUserRejection(new PayError({ code: 'aborted', message: 'x' }))).toBe(false)
    expect(isUserRejection(undefined)).toBe(false)
    expect(isUserRejection('4001')).toBe(false)
  })
})
