package dispatch

// awaitDone waits until every component's Done closed.
func awaitDone(cs []Component) {
	for _, c := range cs {
		<-c.Done()
	}
}
