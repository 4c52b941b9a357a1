# func_lengths.awk - list the C function definitions that start in column 0
# and their length in lines (signature to closing brace), and fail when one
# is longer than LIMIT.  Usage:
#   awk -v LIMIT=80 -f func_lengths.awk FILE...
# Prints "file:line: name: N lines" for each definition over the limit and
# a summary line; exits 1 when there is one.
BEGIN { if (LIMIT == "") LIMIT = 80 }
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
  nfun++
  if (len > LIMIT) {
    printf "%s:%d: %s: %d lines\n", FILENAME, start, name, len
    bad++
  }
  state = 0
}
END {
  printf "%d functions, %d over %d lines\n", nfun, bad + 0, LIMIT
  exit bad ? 1 : 0
}
