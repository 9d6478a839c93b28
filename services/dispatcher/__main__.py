from services.dispatcher.main import main

main()
