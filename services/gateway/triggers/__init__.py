"""Runs that start themselves: schedules held and fired by JetStream message schedules."""
