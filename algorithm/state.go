package algorithm

// stateBuf returns buf emptied, to append a state of n bytes to: buf itself
// when it can hold them (a decision on an existing key writes in place),
// else one new slice of exactly that capacity (appending to a short buf
// would grow it twice).
func stateBuf(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, 0, n)
	}
	return buf[:0]
}
