import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

const rules = path.resolve(import.meta.dirname, '../../ops/prometheus')

/** Prometheus' own tool (Debian's prometheus package; .ci/run installs it) on the shipped alert rules. */
describe('ops/prometheus/caipay.rules.yml', () => {
  it('passes promtool check rules', () => {
    const out = execFileSync('promtool', ['check', 'rules', path.join(rules, 'caipay.rules.yml')], {
      encoding: 'utf8',
    })
    expect(out).toContain('SUCCESS: 11 rules found')
  })

  it('fires each alert when it should and not before (promtool test rules)', () => {
    const out = execFileSync('promtool', ['test', 'rules', path.join(rules, 'caipay.rules.test.yml')], {
      encoding: 'utf8',
    })
    expect(out).toContain('SUCCESS')
  })
})
