/**
 * Excluded-URL matching in the browser, the same syntax as privacy/exclusion.py: `*` matches any
 * run of characters, everything else is literal, the whole subject must match; a pattern
 * starting with `/` is matched against the path (plus the query when the pattern has a `?`).
 * The server applies the rules again, so this only spares sending what it would drop.
 */

function globMatches(pattern, text) {
  // Greedy leftmost placement of the literal pieces: exact for this syntax, no backtracking.
  const pieces = pattern.split('*');
  if (pieces.length === 1) return pattern === text;
  const first = pieces[0];
  const last = pieces[pieces.length - 1];
  if (first.length + last.length > text.length) return false;
  if (!text.startsWith(first) || !text.endsWith(last)) return false;
  let position = first.length;
  const stop = text.length - last.length;
  for (const piece of pieces.slice(1, -1)) {
    const found = text.indexOf(piece, position);
    if (found === -1 || found + piece.length > stop) return false;
    position = found + piece.length;
  }
  return true;
}

function foldAuthority(text) {
  // Scheme and host compare case-blind; the path and query exactly.
  const end = text.indexOf('/', text.indexOf('://') + 3);
  return end === -1 ? text.toLowerCase() : text.slice(0, end).toLowerCase() + text.slice(end);
}

function subjects(url, pattern) {
  const u = new URL(url);
  const text = pattern.startsWith('/')
    ? (u.pathname || '/') + (pattern.includes('?') && u.search ? u.search : '')
    : `${u.protocol}//${u.host}${u.pathname}${u.search}`;
  const forms = [text];
  if (text.includes('%')) {
    try {
      forms.push(decodeURIComponent(text));
    } catch (e) {
      // not decodable: the encoded form is all there is
    }
  }
  return forms;
}

/** Whether one pattern matches `url` (excluded URLs, and the pages a survey targets). */
export function matches(url, pattern) {
  const folded = pattern.startsWith('/') ? pattern : foldAuthority(pattern);
  return subjects(url, pattern).some((s) => globMatches(folded, s));
}

/** The widest scope among the rules matching `url`: "all", "replay" or "none". */
export function exclusionFor(url, rules) {
  let widest = 'none';
  for (const rule of rules || []) {
    if (matches(url, rule.pattern)) {
      if (rule.scope === 'all') return 'all';
      widest = 'replay';
    }
  }
  return widest;
}
