// Package layout holds the test that keeps the repository's folders what
// their names say: the product (every room at the top, cmd/ and examples/)
// imports nothing from testkit/ or bench/, and internal/ holds libraries
// below the product, which import no product room. No product module, Go
// or Python, is over 800 lines.
package layout
