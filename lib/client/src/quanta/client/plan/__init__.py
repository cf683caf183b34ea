"""The client's query plans: the planner (algebra to operators) and the operators."""
