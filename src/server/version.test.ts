import { describe, expect, it } from 'vitest'
import { isPayError } from '../errors/PayError.js'
import { isPreview, resolveApiVersion } from './version.js'

const codeOf = (fn: () => unknown) => {
  try {
    fn()
  } catch (error) {
    return isPayError(error) ? error.code : 'other'
  }
  return 'none'
}

describe('resolveApiVersion', () => {
  it('uses the pinned version without a header and an explicit one with it', () => {
    expect(resolveApiVersion(undefined, '2026-02-18')).toBe('2026-02-18')
    expect(resolveApiVersion('2026-02-18', '2026-02-18')).toBe('2026-02-18')
    expect(resolveApiVersion('2026-02-19.preview', '2026-02-18')).toBe('2026-02-19.preview')
  })
  it('classifies bad versions', () => {
    expect(codeOf(() => resolveApiVersion('v1', '2026-02-18'))).toBe('invalid_api_version')
    expect(codeOf(() => resolveApiVersion('2026-02-18 ', '2026-02-18'))).toBe('invalid_api_version')
    expect(codeOf(() => resolveApiVersion('2025-01-01', '2026-02-18'))).toBe('unknown_api_version')
    expect(codeOf(() => resolveApiVersion('2026-02-18', '2026-02-19.preview'))).toBe('api_version_downgrade')
  })
  it('knows previews', () => {
    expect(isPreview('2026-02-19.preview')).toBe(true)
    expect(isPreview('2026-02-18')).toBe(false)
  })
})
