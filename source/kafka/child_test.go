package kafka_test

const childEnv = "AGGFLOW_KAFKA_CHILD"

func runChild(mode string) int { return 2 }
