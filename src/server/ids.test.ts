import { describe, expect, it } from 'vitest'
import { modeOfApiKey, modeOfAppId, newApiKey, newAppId, newId, randomBase62, sha256Hex } from './ids.js'

describe('ids and keys', () => {
  it('makes base62 of the asked length', () => {
    for (let i = 0; i < 50; i++) expect(randomBase62(32)).toMatch(/^[0-9A-Za-z]{32}$/)
  })
  it('prefixes ids', () => {
    expect(newId('payment')).toMatch(/^pay_[0-9A-Za-z]{24}$/)
    expect(newId('merchant')).toMatch(/^mrch_/)
    expect(newId('cryptoSettlement')).toMatch(/^crypto_/)
  })
  it('keys and app ids carry their mode', () => {
    expect(modeOfApiKey(newApiKey('test'))).toBe('test')
    expect(modeOfApiKey(newApiKey('live'))).toBe('live')
    expect(modeOfApiKey('svc_test_short')).toBeUndefined()
    expect(modeOfAppId(newAppId('test'))).toBe('test')
    expect(modeOfAppId(newAppId('live'))).toBe('live')
    expect(modeOfAppId('app_x')).toBeUndefined()
  })
  it('hashes with SHA-256', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  })
})
