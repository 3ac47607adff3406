package kafka

// balance pauses the fetching of every partition that has no room: its
// pending records reached its share of the budget (the budget over the
// partitions owned), so that the poll loop never waits on one partition
// while the others have room, or its bound above the committed offset was
// reached (WithMaxHeld: every record held, finished or not). It resumes those whose pending records
// fell to half their share and whose bound freed (Intake.Room). It runs
// after every polled batch and on every progress; pauseMu makes the last
// decision the one in force, and is held only across the client's Pause
// and Resume, which call nothing back.
func (c *Consumer[T]) balance() {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	c.mu.Lock()
	os := make(map[int32]*owned[T], len(c.owned))
	for p, o := range c.owned {
		os[p] = o
	}
	c.mu.Unlock()
	if len(os) == 0 {
		return
	}
	share := max(1, c.cfg.maxPending/len(os))
	var pause, resume []int32
	for p, o := range os {
		pending, room := o.in.Tracker().Pending(), o.in.Room()
		switch {
		case !o.paused && (pending >= share || room == 0):
			o.paused = true
			pause = append(pause, p)
		case o.paused && pending <= share/2 && room > 0:
			o.paused = false
			resume = append(resume, p)
		}
	}
	if len(pause) > 0 {
		c.stats.pauses.Add(int64(len(pause)))
		c.cl.PauseFetchPartitions(map[string][]int32{c.sub.Topic: pause})
	}
	if len(resume) > 0 {
		c.cl.ResumeFetchPartitions(map[string][]int32{c.sub.Topic: resume})
	}
}

// unpause resumes released partitions that were paused: a pause outlives
// the assignment in the client, and the partition may come back.
func (c *Consumer[T]) unpause(os map[int32]*owned[T]) {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	var resume []int32
	for p, o := range os {
		if o.paused {
			o.paused = false
			resume = append(resume, p)
		}
	}
	if len(resume) > 0 {
		c.cl.ResumeFetchPartitions(map[string][]int32{c.sub.Topic: resume})
	}
}
