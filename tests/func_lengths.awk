# func_lengths.awk - list the C function definitions that start in column 0
# and their length in lines (signature to closing brace), and fail when one
# is longer than LIMIT.  Usage:
#   awk -v LIMIT=80 -v ALLOW="a.c b.c" -f func_lengths.awk FILE...
# ALLOW: file names (basename) whose functions are listed but not failed.
# Prints "file:line: name: N lines" for each definition over the limit
# ("(allowed)" after it for a file of ALLOW) and a summary line; exits 1
# when a file not allowed has one.
BEGIN {
  if (LIMIT == "") LIMIT = 80
  n = split(ALLOW, a, " ")
  for (i = 1; i <= n; i++) allowed[a[i]] = 1
}
FNR == 1 { state = 0 }
# a candidate: column 0, a name directly followed by "(", no "=" before it
state == 0 && /^[A-Za-z_][A-Za-z0-9_ \t\*]*[ \t\*][A-Za-z_][A-Za-z0-9_]*\(/ && $0 !~ /^(typedef|return|else|if|for|while|switch)[ (]/ {
  head = $0
  sub(/\(.*/, "", head)
  if (head ~ /=/) next
  name = head
  sub(/.*[ \t\*]/, "", name)
  start = FNR
  state = 1
}
state == 1 {
  if ($0 ~ /;[ \t]*$/ && $0 !~ /\{/) { state = 0; next } # a prototype
  if ($0 ~ /\{[ \t]*$/ || $0 ~ /\{[ \t]*\/\*/) { state = 2; if ($0 ~ /^\}/) state = 0; next }
  if ($0 ~ /\{.*\}[ \t]*$/) { state = 0; next }          # a one-line body
  next
}
state == 2 && /^\}/ {
  len = FNR - start + 1
  base = FILENAME
  sub(/.*\//, "", base)
  nfun++
  if (len > LIMIT) {
    if (base in allowed) {
      printf "%s:%d: %s: %d lines (allowed)\n", FILENAME, start, name, len
      nallowed++
    } else {
      printf "%s:%d: %s: %d lines\n", FILENAME, start, name, len
      bad++
    }
  }
  state = 0
}
END {
  printf "%d functions, %d over %d lines (%d in allowed files)\n", nfun, bad + nallowed, LIMIT, nallowed + 0
  exit bad ? 1 : 0
}
